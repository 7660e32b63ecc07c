-- Preemptions in the window, and those an idle GPU in their pool could have avoided.
select count(*) as n, count(case when avoidable then 1 end) as avoidable, coalesce(sum(case when avoidable then lost_gpu_s end), 0) / 3600.0 as avoidable_lost, coalesce(sum(lost_gpu_s), 0) / 3600.0 as lost
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1
