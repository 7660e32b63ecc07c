-- A cluster's whole recorded workload: from its first submission to the last time any of its runs touched.
select min(submit_time) as t0, max(greatest(submit_time, coalesce(r.end_time, r.start_time, submit_time))) as t1
from (select j.submit_time, r.start_time, r.end_time
from jobs as j
left join job_runs as r on r.cluster = j.cluster and r.job_id = j.job_id
where j.cluster = $c) as r
