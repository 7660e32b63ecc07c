-- Victims in the window with a checkpoint in their preempted run, and the GPU-hours they lost.
select count(*) as n, coalesce(sum(lost_gpu_s), 0) / 3600.0 as lost
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1 and last_checkpoint_time is not null
