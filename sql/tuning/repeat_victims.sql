-- Per job submitted in the window: its tier, how often it was preempted, and how long it waited in all.
with preempted as (select victim_job_id as job_id, count(*) as n
from preemption_ledger
where cluster = $c
group by victim_job_id), queued as (select r.job_id, any_value(r.tier) as tier, sum(epoch(coalesce(r.start_time, r.data_end)) - epoch(coalesce(r.eligible_time, r.submit_time))) as wait_s
from stg_runs as r
where r.cluster = $c and r.job_submit_time >= $t0 and r.job_submit_time < $t1
group by r.job_id)
select q.tier, coalesce(p.n, 0) as n, q.wait_s
from queued as q
left join preempted as p using (job_id)
