-- Victims with no checkpoint in their preempted run.
select distinct victim_job_id as job_id
from preemption_ledger
where cluster = $c and last_checkpoint_time is null
