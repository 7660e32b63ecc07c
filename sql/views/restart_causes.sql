-- Per cluster, pool and team (level), UTC day of the run's end, cause of the end and who asked for it where recorded (cause_by: user, admin; run_ends): the runs that ended so, how many of their jobs ran again after it (restarts), and the GPU-hours those runs held; a hang's GPU-hours after the job's last progress report apart.
with

ends as (
    select * from run_ends where cause not in ('running', 'completed')
),

levels as (
    select 'cluster' as level, cluster, cast(null as varchar) as pool, cast(null as varchar) as team, cause, cause_by, restarted, run_gpu_h, gpus, silent_s, date_trunc('day', end_time) as day
    from ends
    union all
    select 'pool' as level, cluster, pool, cast(null as varchar) as team, cause, cause_by, restarted, run_gpu_h, gpus, silent_s, date_trunc('day', end_time) as day
    from ends
    union all
    select 'team' as level, cluster, cast(null as varchar) as pool, team, cause, cause_by, restarted, run_gpu_h, gpus, silent_s, date_trunc('day', end_time) as day
    from ends
),

final as (
    select
        level,
        cluster,
        pool,
        team,
        day,
        cause,
        cause_by,
        count(*) as runs,
        count(*) filter (where restarted) as restarts,
        sum(run_gpu_h) as run_gpu_h,
        sum(gpus * silent_s) filter (where cause = 'hang') / 3600.0 as silent_gpu_h
    from levels
    group by level, cluster, pool, team, day, cause, cause_by
)

select * from final
