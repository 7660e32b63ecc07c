-- Idle stretches in the window and the GPU-hours a reclaim after a given idle time would have freed.
select count(*) as stretches, coalesce(sum(greatest(0, idle_s - $r)), 0) / 3600.0 as reclaimable
from hoarding_stretches
where cluster = $c and start_time >= $t0 and start_time < $t1
