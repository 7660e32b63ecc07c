-- Preemptions in the window, those of victims near completion (how many of them with a measured loss), and the GPU-hours each lost.
select count(*) as n, count(case when near_completion then 1 end) as near, count(case when near_completion and is_measured(basis) then 1 end) as near_measured, coalesce(sum(lost_gpu_s), 0) / 3600.0 as lost, coalesce(sum(case when near_completion then lost_gpu_s end), 0) / 3600.0 as near_lost
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1
