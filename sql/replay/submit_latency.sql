-- How long the scheduler takes to act on a submission: from a preemptor's submission to its first victim's
-- preemption, where no minimum run time ($m) held the victim back. Times recorded in whole seconds ($h: half of
-- that resolution) are truncated, so a submission is taken at the middle of its second.
with
decisions as (
    select epoch(min(l.time)) - epoch(any_value(r.submit_time)) - $h as latency
    from preemption_ledger as l
    inner join job_runs as r on r.cluster = l.cluster and r.job_id = l.preemptor_job_id and r.run = l.preemptor_run
    inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
    where l.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1 and l.preemptor_run = 1
        and epoch(r.submit_time) + $h - epoch(l.run_start) >= $m
    group by l.preemptor_job_id
)
select median(latency) as latency, quantile_cont(latency, 0.25) as low, quantile_cont(latency, 0.75) as high,
    count(*) as n
from decisions where latency >= 0 and latency <= 30
