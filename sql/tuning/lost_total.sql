-- GPU-hours lost by all victims in the window.
select coalesce(sum(lost_gpu_s), 0) / 3600.0 as lost
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1
