-- Per day (period 'day') and ISO week (period 'week'), pool and team (and '(all)' teams): preemptor GPU-seconds gained, weighted by the preemptor's tier, against victim GPU-seconds lost plus requeue wait plus warm-up, weighted by the victim's tier; gains go to the preemptor's team, costs to the victim's, and cost_exceeds_gain flags a net loss of the period (null when preemptions of unknown gain could outweigh it).
with

ledger as (
    select * from preemption_ledger
),

weights as (
    select * from analytics_tier_weights
),

gains as (
    select
        l.cluster,
        date_trunc('day', l.time) as day,
        l.pool,
        l.preemptor_team as team,
        l.gain_gpu_s,
        l.gain_gpu_s * w.weight as gain_weighted_gpu_s,
        cast(0 as double) as lost_gpu_s,
        cast(0 as double) as requeue_gpu_s,
        cast(0 as double) as warmup_gpu_s,
        cast(0 as double) as cost_weighted_gpu_s,
        0 as preemptions,
        0 as gains_unknown
    from ledger as l
    inner join weights as w on w.tier = l.preemptor_tier
    where l.gain_gpu_s is not null
),

costs as (
    select
        l.cluster,
        date_trunc('day', l.time) as day,
        l.pool,
        l.victim_team as team,
        cast(0 as double) as gain_gpu_s,
        cast(0 as double) as gain_weighted_gpu_s,
        l.lost_gpu_s,
        l.requeue_gpu_s,
        l.warmup_gpu_s,
        (l.lost_gpu_s + l.requeue_gpu_s + l.warmup_gpu_s) * w.weight as cost_weighted_gpu_s,
        1 as preemptions,
        -- a preemption whose gain is unknown (no preemptor run found) adds an unknown, not a 0, to the gains
        case when l.gain_gpu_s is null then 1 else 0 end as gains_unknown
    from ledger as l
    inner join weights as w on w.tier = l.victim_tier
),

items as (
    select * from gains
    union all
    select * from costs
),

totals as (
    -- each team's row, and the pool's row over all teams (team '(all)'), per day and per ISO week
    select
        cluster,
        case when grouping(day) = 0 then 'day' else 'week' end as period,
        case when grouping(day) = 0 then day else week end as window_start,
        pool,
        case when grouping(team) = 1 then '(all)' else team end as team,
        cast(sum(preemptions) as bigint) as preemptions,
        sum(gain_gpu_s) as gain_gpu_s,
        sum(gain_weighted_gpu_s) as gain_weighted_gpu_s,
        sum(lost_gpu_s) as lost_gpu_s,
        sum(requeue_gpu_s) as requeue_gpu_s,
        sum(warmup_gpu_s) as warmup_gpu_s,
        sum(cost_weighted_gpu_s) as cost_weighted_gpu_s,
        cast(sum(gains_unknown) as bigint) as gains_unknown
    from (select *, date_trunc('week', day) as week from items) as i
    group by grouping sets (
        (cluster, day, pool, team), (cluster, day, pool), (cluster, week, pool, team), (cluster, week, pool)
    )
),

final as (
    select
        *,
        gain_weighted_gpu_s - cost_weighted_gpu_s as net_weighted_gpu_s,
        -- unknown (null) when unknown gains could still outweigh the cost
        case when cost_weighted_gpu_s > gain_weighted_gpu_s and gains_unknown > 0 then null else cost_weighted_gpu_s > gain_weighted_gpu_s end
            as cost_exceeds_gain
    from totals
)

select * from final
