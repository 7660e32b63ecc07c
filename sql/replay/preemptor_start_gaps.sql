-- Seconds from each preemptor's eligibility (or submission) to its start, for the grace time in force.
select round(epoch(r.start_time) - epoch(coalesce(r.eligible_time, r.submit_time, j.submit_time))) as gap
from (select distinct preemptor_job_id, preemptor_run
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1) as p
inner join job_runs as r on r.cluster = $c and r.job_id = p.preemptor_job_id and r.run = p.preemptor_run
inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
