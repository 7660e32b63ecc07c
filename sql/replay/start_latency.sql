-- The median wait from GPUs let go to the start of a run that waited for them, with its quartiles.
-- How long the scheduler takes to start a run once the GPUs it waited for are let go: from the last end on its
-- hosts (at its preemption's time when preempted) to the start of a run that was waiting then. Preemptors are
-- left out (they start as their victims leave), and so are first starts right at submission (a submission is
-- scheduled at once). Times recorded in whole seconds ($h: half of that resolution) are truncated, so each is
-- taken at the middle of its second.
with
window_runs as (
    select r.*, coalesce(r.eligible_time, r.submit_time) as ready_time
    from job_runs as r
    inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
    where r.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1 and r.start_time is not null
),
preemptors as (
    select distinct preemptor_job_id as job_id, preemptor_run as run
    from preemption_ledger where cluster = $c and preemptor_job_id is not null
),
freed as (
    select r.job_id, r.run, r.hosts, coalesce(l.time, r.end_time) as end_time
    from job_runs as r
    left join preemption_ledger as l on l.cluster = r.cluster and l.victim_job_id = r.job_id and l.victim_run = r.run
    where r.cluster = $c and r.end_time is not null and r.hosts is not null
),
handovers as (
    select epoch(w.start_time) + $h - max(epoch(f.end_time) + case when epoch(f.end_time) = floor(epoch(f.end_time))
        then $h else 0 end) as latency
    from window_runs as w
    inner join freed as f
        on f.hosts = w.hosts and not (f.job_id = w.job_id and f.run = w.run)
        and floor(epoch(f.end_time)) <= epoch(w.start_time) and f.end_time > w.ready_time
    left join preemptors as p on p.job_id = w.job_id and p.run = w.run
    where p.job_id is null and w.start_time > w.ready_time
    group by w.job_id, w.run, w.start_time
)
select median(latency) as latency, quantile_cont(latency, 0.25) as low, quantile_cont(latency, 0.75) as high,
    count(*) as n
from handovers where latency >= 0 and latency <= 30
