-- The median wait from a preemptor's submission to its first victim's signal, with its quartiles.
-- How long the scheduler takes to act on a submission: from a preemptor's submission to its first victim's
-- signal (its preemption less the grace time $g, after which the scheduler kills it), for preemptors that could preempt at once: no minimum run time ($m) held their first victim back,
-- and the GPUs of their pool that runs they may not preempt (of their own tier or above, or not preemptible)
-- held at their submission left room enough. Times recorded in whole seconds ($h: half of that resolution) are
-- truncated, so a submission is taken at the middle of its second.
with
preemptors as (
    select
        l.preemptor_job_id as job_id,
        any_value(r.submit_time) as submit_time,
        any_value(r.gpus) as gpus,
        any_value(coalesce(r.pool, j.pool)) as pool,
        any_value(j.tier) as tier,
        min(l.time) as first_time
    from preemption_ledger as l
    inner join job_runs as r on r.cluster = l.cluster and r.job_id = l.preemptor_job_id and r.run = l.preemptor_run
    inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
    where l.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1 and l.preemptor_run = 1
        and epoch(r.submit_time) + $h - epoch(l.run_start) >= $m
    group by l.preemptor_job_id
),
capacity as (
    select pool, arg_max(gpus, valid_from) as gpus from pools where cluster = $c and valid_from < $t1 group by pool
),
held as (
    -- GPUs of runs the preemptor may not evict, running at its submission
    select p.job_id, sum(r.gpus) as gpus
    from preemptors as p
    inner join job_runs as r on r.cluster = $c and coalesce(r.pool, '') = p.pool and r.start_time <= p.submit_time
        and (r.end_time is null or r.end_time > p.submit_time) and r.job_id <> p.job_id
    inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
    where not j.preemptible
        or (case j.tier when 'critical' then 3 when 'high' then 2 when 'normal' then 1 else 0 end)
            >= (case p.tier when 'critical' then 3 when 'high' then 2 when 'normal' then 1 else 0 end)
    group by p.job_id
),
decisions as (
    select epoch(p.first_time) - $g - epoch(p.submit_time) - $h as latency
    from preemptors as p
    inner join capacity as c on c.pool = p.pool
    left join held as h on h.job_id = p.job_id
    where c.gpus - coalesce(h.gpus, 0) >= p.gpus
)
select median(latency) as latency, quantile_cont(latency, 0.25) as low, quantile_cont(latency, 0.75) as high,
    count(*) as n
from decisions where latency >= 0 and latency <= 30
