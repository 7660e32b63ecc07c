-- Per preemption, the preemptor's wait from eligibility to start and its victim's run time at that eligibility.
-- (Eligibility falls back to the submission; a victim that old was never held by a minimum run time.)
-- Per preemption: seconds from the preemptor's eligibility (or submission) to its start, and how long its victim
-- had run by that eligibility (a victim that old was never held by a minimum run time).
select
    epoch(r.start_time) - epoch(coalesce(r.eligible_time, r.submit_time, j.submit_time)) as gap,
    epoch(coalesce(r.eligible_time, r.submit_time, j.submit_time)) - epoch(l.run_start) as victim_age
from preemption_ledger as l
inner join job_runs as r on r.cluster = $c and r.job_id = l.preemptor_job_id and r.run = l.preemptor_run
inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
where l.cluster = $c and l.time >= $t0 and l.time < $t1
