-- Jobs whose run completed on a preemptor's hosts within the grace time before the preemptor started.
select distinct r.job_id
from (select job_id, end_time, unnest(string_split(hosts, ',')) as host
from job_runs
where cluster = $c and state = 'completed' and hosts is not null) as r
inner join (select distinct l.preemptor_start, unnest(string_split(pr.hosts, ',')) as host
from preemption_ledger as l
inner join job_runs as pr on pr.cluster = l.cluster and pr.job_id = l.preemptor_job_id and pr.run = l.preemptor_run
where l.cluster = $c and pr.hosts is not null) as p on p.host = r.host and r.end_time <= p.preemptor_start and epoch(r.end_time) > epoch(p.preemptor_start) - $g
