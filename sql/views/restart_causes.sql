-- Per cluster, pool and team (level), UTC day of the run's end, cause of the end and who asked for it where recorded (cause_by: user, admin; run_ends): the runs that ended so, how many of their jobs ran again after it (restarts), and the GPU-hours those runs held; a hang's GPU-hours after the job's last progress report apart. Restarts the scheduler counted that no record shows are runs of cause unknown, on the day the run that reveals them started.
with

recorded as (
    select cluster, pool, team, cause, cause_by, restarted, run_gpu_h, gpus, silent_s, end_time as at_time, 1 as runs
    from run_ends
    where cause not in ('running', 'completed')
),

unrecorded as (
    -- each ended, and the job ran again (the run that reveals it); what it held is not known
    select
        cluster, pool, team, 'unknown' as cause, cast(null as varchar) as cause_by, true as restarted,
        cast(null as double) as run_gpu_h, gpus, cast(null as double) as silent_s, start_time as at_time,
        restarts_hidden as runs
    from run_ends
    where restarts_hidden > 0
),

ends as (
    select * from recorded
    union all
    select * from unrecorded
),

levels as (
    select 'cluster' as level, cluster, cast(null as varchar) as pool, cast(null as varchar) as team, cause, cause_by, runs, restarted, run_gpu_h, gpus, silent_s, date_trunc('day', at_time) as day
    from ends
    union all
    select 'pool' as level, cluster, pool, cast(null as varchar) as team, cause, cause_by, runs, restarted, run_gpu_h, gpus, silent_s, date_trunc('day', at_time) as day
    from ends
    union all
    select 'team' as level, cluster, cast(null as varchar) as pool, team, cause, cause_by, runs, restarted, run_gpu_h, gpus, silent_s, date_trunc('day', at_time) as day
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
        cast(sum(runs) as bigint) as runs,
        cast(coalesce(sum(runs) filter (where restarted), 0) as bigint) as restarts,
        sum(run_gpu_h) as run_gpu_h,
        sum(gpus * silent_s) filter (where cause = 'hang') / 3600.0 as silent_gpu_h
    from levels
    group by level, cluster, pool, team, day, cause, cause_by
)

select * from final
