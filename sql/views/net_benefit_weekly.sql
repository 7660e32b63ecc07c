-- Per ISO week, pool and team (and '(all)' teams): the sums of net_benefit_daily over the week's days, with net_value and cost_exceeds_gain recomputed on the week's totals.
with

daily as (
    select * from net_benefit_daily
),

per_week as (
    select
        cluster,
        date_trunc('week', window_start) as window_start,
        pool,
        team,
        cast(sum(preemptions) as bigint) as preemptions,
        sum(gain_gpu_s) as gain_gpu_s,
        sum(gain_value) as gain_value,
        sum(lost_gpu_s) as lost_gpu_s,
        sum(requeue_gpu_s) as requeue_gpu_s,
        sum(warmup_gpu_s) as warmup_gpu_s,
        sum(cost_value) as cost_value,
        cast(sum(gains_unknown) as bigint) as gains_unknown
    from daily
    group by cluster, date_trunc('week', window_start), pool, team
),

final as (
    select
        *,
        gain_value - cost_value as net_value,
        case when cost_value > gain_value and gains_unknown > 0 then null else cost_value > gain_value end
            as cost_exceeds_gain
    from per_week
)

select * from final
