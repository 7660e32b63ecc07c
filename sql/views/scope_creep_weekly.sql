-- Per week, pool, team and tier: jobs submitted and GPU-hours started, and each tier's share of the team's jobs and GPU-hours in that pool and week.
with

jobs_ as (
    select * from jobs
),

runs as (
    select * from stg_runs
),

submitted as (
    select
        cluster,
        date_trunc('week', submit_time) as week,
        coalesce(pool, '(none)') as pool,
        coalesce(team, '(none)') as team,
        tier,
        count(*) as jobs
    from jobs_
    group by all
),

used as (
    select
        cluster,
        date_trunc('week', effective_start) as week,
        coalesce(pool, '(none)') as pool,
        team,
        tier,
        sum(gpus * effective_s) / 3600.0 as gpu_hours
    from runs
    group by all
),

combined as (
    select
        coalesce(s.cluster, u.cluster) as cluster,
        coalesce(s.week, u.week) as week,
        coalesce(s.pool, u.pool) as pool,
        coalesce(s.team, u.team) as team,
        coalesce(s.tier, u.tier) as tier,
        coalesce(s.jobs, 0) as jobs,
        coalesce(u.gpu_hours, 0) as gpu_hours
    from submitted as s
    full outer join used as u
        on u.cluster = s.cluster and u.week = s.week and u.pool = s.pool and u.team = s.team and u.tier = s.tier
),

final as (
    select
        *,
        jobs / nullif(sum(jobs) over (partition by cluster, week, pool, team), 0) as job_share,
        gpu_hours / nullif(sum(gpu_hours) over (partition by cluster, week, pool, team), 0) as gpu_hour_share
    from combined
)

select * from final
