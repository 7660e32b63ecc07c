-- One row per run that started: how it ended (cause: preemption, node_failure, requeue, cancel, time_limit, crash, hang, completed, running), decided from the scheduler's record, the preemption ledger's binding and the job's own progress, who asked for a cancel, requeue or a hang's end where the scheduler records it (cause_by: user, the job's own, or admin), whether the job ran again after it, and the restarts the scheduler counted before it that no record shows (restarts_hidden).
with

params as (
    select * from analytics_params
),

runs as (
    select * from stg_runs
),

preempted as (
    -- the runs the ledger holds (state preempted, or bound by a preemption link)
    select distinct cluster, victim_job_id as job_id, victim_run as run from stg_preemptions
),

counted as (
    -- restarts the scheduler counted before each run (Slurm 24.11+ restart_cnt) beyond the runs recorded before it:
    -- runs no record shows (a document read without --duplicates, purged records); each counted at the first run
    -- that reveals it
    select
        cluster,
        job_id,
        run,
        restarts_before - (run - 1) as unrecorded
    from job_runs
    where restarts_before is not null
),

hidden as (
    select
        cluster,
        job_id,
        run,
        greatest(0, unrecorded - greatest(0, coalesce(max(unrecorded) over (
            partition by cluster, job_id order by run rows between unbounded preceding and 1 preceding
        ), 0))) as restarts_hidden
    from counted
),

reports as (
    -- the job's own signs of progress within each run: progress reports and checkpoints
    select cluster, job_id, run, time
    from checkpoints
    where run is not null and kind in ('progress', 'checkpoint')
),

gaps as (
    select
        cluster,
        job_id,
        run,
        time,
        epoch(time) - epoch(lag(time) over (partition by cluster, job_id, run order by time)) as gap_s
    from reports
),

silence as (
    select
        cluster,
        job_id,
        run,
        max(time) as last_progress_time,
        count(*) as reports,
        median(gap_s) filter (where gap_s > 0) as usual_gap_s
    from gaps
    group by cluster, job_id, run
),

classified as (
    select
        r.cluster,
        r.job_id,
        r.run,
        r.pool,
        r.team,
        r.tier,
        r.gpus,
        r.start_time,
        r.end_time,
        r.state,
        r.user_name,
        jr.ended_by,
        s.last_progress_time,
        s.usual_gap_s,
        case when r.end_time is not null and s.last_progress_time is not null
            then greatest(0, epoch(r.end_time) - epoch(s.last_progress_time)) end as silent_s,
        r.next_start_time is not null as restarted,
        r.gpus * r.effective_s / 3600.0 as run_gpu_h,
        h.restarts_hidden,
        -- silent for long before an end other than completion or preemption: the job had stopped working (a
        -- hang), whatever the scheduler then did to it (a watchdog's cancel or requeue, the time limit)
        coalesce(
            r.state in ('failed', 'cancelled', 'requeued', 'timeout')
            and s.reports >= 3
            and epoch(r.end_time) - epoch(s.last_progress_time)
            >= greatest(p.hang_min_s, p.hang_gap_factor * coalesce(s.usual_gap_s, 0)),
            false
        ) as hung,
        pe.run is not null as in_ledger
    from runs as r
    cross join params as p
    left join silence as s on s.cluster = r.cluster and s.job_id = r.job_id and s.run = r.run
    left join preempted as pe on pe.cluster = r.cluster and pe.job_id = r.job_id and pe.run = r.run
    left join job_runs as jr on jr.cluster = r.cluster and jr.job_id = r.job_id and jr.run = r.run
    left join hidden as h on h.cluster = r.cluster and h.job_id = r.job_id and h.run = r.run
),

decided as (
    select
        *,
        case
            when in_ledger then 'preemption'
            when end_time is null then 'running'
            when hung then 'hang'
            when state = 'completed' then 'completed'
            when state = 'node_fail' then 'node_failure'
            when state = 'requeued' then 'requeue'
            when state = 'cancelled' then 'cancel'
            when state = 'timeout' then 'time_limit'
            when state = 'failed' then 'crash'
            else 'unknown'
        end as cause
    from classified
),

final as (
    select
        cluster,
        job_id,
        run,
        pool,
        team,
        tier,
        gpus,
        start_time,
        end_time,
        state,
        cause,
        ended_by,
        -- the job's own user, or an admin: only root, SlurmUser, an operator or an account's coordinator may end
        -- another user's job. Slurm's text output names a uid: uid 0 is root; another uid is the job's user's or
        -- not, which the record does not say (NULL, as where nobody is recorded).
        case
            when cause not in ('cancel', 'requeue', 'hang') or ended_by is null then null
            when ended_by = user_name or (ended_by = 'uid 0' and user_name = 'root') then 'user'
            when ended_by in ('root', 'uid 0') or ended_by not like 'uid %' then 'admin'
        end as cause_by,
        last_progress_time,
        usual_gap_s,
        silent_s,
        restarted,
        run_gpu_h,
        restarts_hidden
    from decided
)

select * from final
