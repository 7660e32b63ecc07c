-- The ledger's preemptions, lost GPU-hours, work thrown away (unknown while a victim's warm-up is not measured) and victims among the jobs submitted in the window.
select
    count(*) as n,
    coalesce(sum(l.lost_gpu_s), 0) / 3600.0 as lost,
    case when count(l.warmup_s) = count(*) then coalesce(sum(l.lost_gpu_s + l.victim_gpus * l.warmup_s), 0) / 3600.0 end
        as thrown_away,
    count(distinct l.victim_job_id) as victims
from preemption_ledger as l
inner join jobs as j on j.cluster = l.cluster and j.job_id = l.victim_job_id
where l.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1 and l.time < $t1
