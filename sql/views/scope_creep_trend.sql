-- Per pool over the last trend_weeks weeks: the critical-plus-high share of jobs and GPU-hours, its weekly slope, and the share of preemptors that behaved unlike critical work (hoarded idle GPUs or ran more than long_runner_factor times their tier's median run).
with

params as (
    select * from analytics_params
),

runs as (
    select * from stg_runs
),

gains as (
    select * from preemption_gains
),

hoarding as (
    select * from idle_hoarding_runs
),

recent as (
    select * from scope_creep_recent
),

last_week as (
    select cluster, max(week) as last_week from recent group by cluster
),

pool_weeks as (
    select
        cluster,
        pool,
        week,
        week_no,
        sum(case when tier in ('critical', 'high') then jobs else 0 end) / nullif(sum(jobs), 0) as high_job_share,
        sum(case when tier in ('critical', 'high') then gpu_hours else 0 end) / nullif(sum(gpu_hours), 0)
            as high_gpu_hour_share
    from recent
    group by cluster, pool, week, week_no
),

trend as (
    select
        cluster,
        pool,
        count(*) as weeks,
        min(week) as first_week,
        max(week) as last_week,
        arg_min(high_gpu_hour_share, week) as high_gpu_hour_share_first,
        arg_max(high_gpu_hour_share, week) as high_gpu_hour_share_last,
        case when count(*) >= 2 then regr_slope(high_gpu_hour_share, week_no) end as high_gpu_hour_share_slope,
        case when count(*) >= 2 then regr_slope(high_job_share, week_no) end as high_job_share_slope
    from pool_weeks
    group by cluster, pool
),

tier_median as (
    select cluster, tier, median(effective_s) as median_s
    from runs
    where state = 'completed'
    group by cluster, tier
),

preemptors as (
    select
        g.cluster,
        g.pool,
        g.preemptor_job_id,
        g.preemptor_run,
        h.idle_gpu_hours is not null as hoarded,
        coalesce(r.effective_s > p.long_runner_factor * m.median_s, false) as long_runner
    from gains as g
    cross join params as p
    inner join last_week as l on l.cluster = g.cluster
    inner join runs as r on r.cluster = g.cluster and r.job_id = g.preemptor_job_id and r.run = g.preemptor_run
    left join tier_median as m on m.cluster = r.cluster and m.tier = r.tier
    left join hoarding as h on h.cluster = g.cluster and h.job_id = g.preemptor_job_id and h.run = g.preemptor_run
    where g.time >= l.last_week - to_days(7 * (p.trend_weeks - 1))
),

behaviour as (
    select
        cluster,
        pool,
        count(*) as preemptor_runs,
        cast(sum(case when hoarded then 1 else 0 end) as bigint) as preemptors_hoarding,
        cast(sum(case when long_runner then 1 else 0 end) as bigint) as preemptors_long_running,
        avg(case when hoarded or long_runner then 1.0 else 0.0 end) as unlike_critical_share
    from preemptors
    group by cluster, pool
),

final as (
    select
        t.*,
        coalesce(b.preemptor_runs, 0) as preemptor_runs,
        coalesce(b.preemptors_hoarding, 0) as preemptors_hoarding,
        coalesce(b.preemptors_long_running, 0) as preemptors_long_running,
        b.unlike_critical_share
    from trend as t
    left join behaviour as b on b.cluster = t.cluster and b.pool = t.pool
)

select * from final
