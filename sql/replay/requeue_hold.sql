-- The shortest hold between a requeued run's submission and its eligibility in the window.
select min(epoch(eligible_time) - epoch(submit_time)) as hold
from job_runs
where cluster = $c and run > 1 and eligible_time is not null and submit_time is not null and submit_time >= $t0 and submit_time < $t1
