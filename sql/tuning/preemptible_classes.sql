-- The priority classes of the window's preemptible jobs.
select distinct priority_class
from jobs
where cluster = $c and preemptible and priority_class is not null and submit_time >= $t0 and submit_time < $t1
order by 1
