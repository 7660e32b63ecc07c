-- The ledger's preemptions, lost GPU-hours and victims among the jobs submitted in the window.
select count(*) as n, coalesce(sum(l.lost_gpu_s), 0) / 3600.0 as lost, count(distinct l.victim_job_id) as victims
from preemption_ledger as l
inner join jobs as j on j.cluster = l.cluster and j.job_id = l.victim_job_id
where l.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1 and l.time < $t1
