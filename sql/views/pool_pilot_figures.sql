-- Per pool and week, the before-and-after figures of a pilot: critical-plus-high queue wait (median, p90) of runs started, completion time (submit to final end) of jobs finished, retries per finished job, and preemptions.
with

waits_ as (
    select * from pilot_waits
),

jobs_ as (
    select * from pilot_jobs
),

ledger as (
    select * from preemption_ledger
),

waits as (
    select
        cluster,
        pool,
        date_trunc('week', start_time) as week,
        quantile_cont(wait_s, 0.5) as high_wait_p50_s,
        quantile_cont(wait_s, 0.9) as high_wait_p90_s,
        count(*) as high_runs_started
    from waits_
    group by all
),

completion as (
    select
        cluster,
        pool,
        date_trunc('week', finished_at) as week,
        quantile_cont(completion_s, 0.5) as completion_p50_s,
        quantile_cont(completion_s, 0.9) as completion_p90_s,
        avg(retries) as retries_per_job,
        count(*) as jobs_finished
    from jobs_
    where finished_at is not null
    group by all
),

preempted as (
    select cluster, pool, date_trunc('week', time) as week, count(*) as preemptions
    from ledger
    group by all
),

keys as (
    select cluster, pool, week from waits
    union
    select cluster, pool, week from completion
    union
    select cluster, coalesce(pool, '(none)'), week from preempted
),

final as (
    select
        k.cluster,
        k.pool,
        k.week,
        w.high_wait_p50_s,
        w.high_wait_p90_s,
        coalesce(w.high_runs_started, 0) as high_runs_started,
        c.completion_p50_s,
        c.completion_p90_s,
        c.retries_per_job,
        coalesce(c.jobs_finished, 0) as jobs_finished,
        coalesce(p.preemptions, 0) as preemptions
    from keys as k
    left join waits as w on w.cluster = k.cluster and w.pool = k.pool and w.week = k.week
    left join completion as c on c.cluster = k.cluster and c.pool = k.pool and c.week = k.week
    left join preempted as p on p.cluster = k.cluster and coalesce(p.pool, '(none)') = k.pool and p.week = k.week
)

select * from final
