-- How many of the window's runs have a time that is not a whole second, and how many the simulator wrote.
-- Whether the window's run times are whole seconds read from a scheduler that truncates them (sacct, Kubernetes
-- timestamps): then each is the true time truncated. The simulator writes exact whole seconds.
select
    count(*) as n,
    count(*) filter (where epoch(coalesce(r.start_time, r.submit_time)) <> floor(epoch(coalesce(r.start_time, r.submit_time)))
        or epoch(r.end_time) <> floor(epoch(r.end_time))) as fractional,
    count(*) filter (where r.source = 'simulator') as exact
from job_runs as r
inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
where r.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1
