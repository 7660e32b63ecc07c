-- The live preemption cost of every job running at $at: its GPUs x (progress at risk + expected warm-up + expected requeue wait), each component apart, with its near-completion share and recent preemptions (docs/figures.md section 7).
-- The progress at risk is the ledger's own rule (progress_at_risk_s). Raw tables for what runs now (fresher than
-- the last analyze); the ledger and expected_requeue, as of the last analyze, for the history.
with

runs as (
    select * from job_runs
),

jobs_ as (
    select * from jobs
),

ckpts as (
    select * from checkpoints where kind = 'checkpoint' and time <= $at
),

ledger as (
    select * from preemption_ledger where time <= $at
),

requeue as (
    select * from expected_requeue
),

data_ends as (
    -- how far each source's data reach (sql/live/data_ends.sql): its newest record or live read, not its load time
    select * from source_data_ends
),

running as (
    -- one run per job (the latest, should bad data leave two open)
    select
        r.cluster,
        r.job_id,
        r.run,
        coalesce(r.pool, j.pool) as pool,
        j.tier,
        coalesce(j.team, '(none)') as team,
        coalesce(j.user_name, '(none)') as user_name,
        j.preemptible,
        r.gpus,
        r.start_time,
        j.checkpoint_interval_s,
        j.work_s,
        j.source as job_source,
        d.data_end,
        -- a stalled collection, or data that ended, leave a job "running": what it risks then is not known
        coalesce(epoch(cast($at as timestamptz)) - epoch(d.data_end) > $max_age_s, true) as stale,
        row_number() over (partition by r.cluster, r.job_id order by r.run desc) as latest
    from runs as r
    inner join jobs_ as j on j.cluster = r.cluster and j.job_id = r.job_id
    left join data_ends as d on d.cluster = r.cluster and d.source = j.source
    where r.start_time <= $at and (r.end_time is null or r.end_time > $at)
),

job_has_ckpts as (
    select distinct cluster, job_id from ckpts
),

checkpoint_source as (
    -- the stream of the job's latest checkpoint at or before $at (progress_source, as the ledger names it)
    select cluster, job_id, stream_of(origin, source) as checkpoint_source
    from (
        select c.cluster, c.job_id, c.origin, c.source,
            row_number() over (partition by c.cluster, c.job_id order by c.time desc) as latest
        from ckpts as c
    ) as ranked
    where latest = 1
),

last_ckpt as (
    select r.cluster, r.job_id, max(c.time) as last_checkpoint_time
    from running as r
    inner join ckpts as c
        on c.cluster = r.cluster
        and c.job_id = r.job_id
        and saves_run(c.run, c.time, r.run, r.start_time, cast($at as timestamptz))
    where r.latest = 1
    group by r.cluster, r.job_id
),

at_risk as (
    select
        r.*,
        lc.last_checkpoint_time,
        -- rollback needs a restart that already happened: a running job's time at risk never has it
        progress_basis(jc.job_id is not null, false, r.checkpoint_interval_s) as progress_basis,
        case
            when jc.job_id is not null then cs.checkpoint_source
            when r.checkpoint_interval_s is not null then r.job_source
        end as progress_source,
        case when not r.stale then progress_at_risk_s(
            progress_basis(jc.job_id is not null, false, r.checkpoint_interval_s),
            epoch(cast($at as timestamptz)) - epoch(coalesce(lc.last_checkpoint_time, r.start_time)),
            epoch(cast($at as timestamptz)) - epoch(r.start_time),
            r.checkpoint_interval_s
        ) end as at_risk_s
    from running as r
    left join job_has_ckpts as jc on jc.cluster = r.cluster and jc.job_id = r.job_id
    left join last_ckpt as lc on lc.cluster = r.cluster and lc.job_id = r.job_id
    left join checkpoint_source as cs on cs.cluster = r.cluster and cs.job_id = r.job_id
    where r.latest = 1
),

warmups as (
    -- the warm-ups measured after restarts, also those the ledger charges to a restart's own loss (warmup_s 0)
    select cluster, victim_job_id, victim_team, pool, restart_warmup_s as warmup_s
    from stg_preemptions where restart_warmup_s is not null
),

job_warmup as (
    select cluster, victim_job_id as job_id, median(warmup_s) as warmup_s from warmups group by all
),

team_warmup as (
    select cluster, victim_team as team, median(warmup_s) as warmup_s from warmups group by all
),

pool_warmup as (
    select cluster, pool, median(warmup_s) as warmup_s from warmups group by all
),

recent as (
    select * from ledger where epoch(time) > epoch(cast($at as timestamptz)) - $recent_s
),

job_recent as (
    select cluster, victim_job_id as job_id, count(*) as n from recent group by all
),

team_recent as (
    select cluster, victim_team as team, count(*) as n from recent group by all
),

job_runtime as (
    -- the job's run time up to $at, all runs, less the progress its earlier preemptions threw away (as the ledger's work done)
    select r.cluster, r.job_id, sum(greatest(0, epoch(least(coalesce(r.end_time, $at), $at)) - epoch(r.start_time))) as run_s
    from runs as r
    inner join at_risk as a on a.cluster = r.cluster and a.job_id = r.job_id
    where r.start_time <= $at
    group by all
),

job_waste as (
    select cluster, victim_job_id as job_id, sum(lost_s + coalesce(warmup_s, 0)) as waste_s from ledger group by all
),

costed as (
    select
        a.*,
        case
            when jw.warmup_s is not null then 'job'
            when tw.warmup_s is not null then 'team'
            when pw.warmup_s is not null then 'pool'
        end as warmup_basis,
        coalesce(jw.warmup_s, tw.warmup_s, pw.warmup_s) as expected_warmup_s,
        -- where fewer than half of its group restarted within the longest wait seen, that wait stands in: a lower
        -- bound of the wait, and of the cost, which still ranks the job among the costliest
        coalesce(q.expected_requeue_s, q.longest_wait_s) as expected_requeue_s,
        q.requeue_group as requeue_basis,
        q.expected_requeue_s is null and q.longest_wait_s is not null as requeue_at_least,
        -- least() skips a NULL: the share is unknown (NULL) without work_s, never 1
        case when a.work_s > 0 and not a.stale then least(1.0, (rt.run_s - coalesce(w.waste_s, 0)) / a.work_s) end
            as near_completion_share,
        coalesce(jr.n, 0) as job_preemptions_recent,
        coalesce(tr.n, 0) as team_preemptions_recent
    from at_risk as a
    left join job_warmup as jw on jw.cluster = a.cluster and jw.job_id = a.job_id
    left join team_warmup as tw on tw.cluster = a.cluster and tw.team = a.team
    left join pool_warmup as pw on pw.cluster = a.cluster and pw.pool is not distinct from a.pool
    left join requeue as q on q.cluster = a.cluster and q.pool is not distinct from a.pool and q.tier = a.tier
        and q.gpus is not distinct from a.gpus
    left join job_runtime as rt on rt.cluster = a.cluster and rt.job_id = a.job_id
    left join job_waste as w on w.cluster = a.cluster and w.job_id = a.job_id
    left join job_recent as jr on jr.cluster = a.cluster and jr.job_id = a.job_id
    left join team_recent as tr on tr.cluster = a.cluster and tr.team = a.team
),

final as (
    select
        cluster,
        job_id,
        run,
        pool,
        tier,
        team,
        user_name,
        preemptible,
        gpus,
        cast($at as timestamptz) as computed_at,
        start_time as run_start,
        last_checkpoint_time,
        at_risk_s,
        gpus * at_risk_s as at_risk_gpu_s,
        expected_warmup_s,
        warmup_basis,
        gpus * expected_warmup_s as warmup_gpu_s,
        expected_requeue_s,
        requeue_basis,
        requeue_at_least,
        gpus * expected_requeue_s as requeue_gpu_s,
        gpus * (at_risk_s + expected_warmup_s + expected_requeue_s) as cost_gpu_s,
        near_completion_share,
        cast(job_preemptions_recent as integer) as job_preemptions_recent,
        cast(team_preemptions_recent as integer) as team_preemptions_recent,
        progress_basis as basis,
        progress_source,
        nullif(concat_ws(
            '; ',
            case when stale then 'progress at risk: the scheduler''s data end at '
                || coalesce(strftime(data_end, '%Y-%m-%d %H:%M UTC'), 'no record') || ' (live_cost.max_data_age_s)' end,
            case when expected_warmup_s is null
                then 'warm-up: no measured warm-up of the job, its team or its pool' end,
            case when expected_requeue_s is null
                then 'requeue wait: no victim of its tier within analytics.requeue_window_s' end
        ), '') as unknown
    from costed
)

select * from final
