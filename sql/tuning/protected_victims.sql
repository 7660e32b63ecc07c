-- Victims in the window past a share of their work done: how many, what they lost, the median work left.
select count(*) as n, coalesce(sum(lost_gpu_s), 0) / 3600.0 as lost, median(work_needed_s - work_done_s) as left_s
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1 and work_done_share >= $s
