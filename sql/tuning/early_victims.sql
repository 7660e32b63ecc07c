-- Preemptions in the window whose victim was younger than the early-victim age, or still in the warm-up of a restart.
with warm as (select victim_job_id, median(warmup_s) as warmup_s
from preemption_ledger
where cluster = $c
group by victim_job_id), early as (select l.*, l.run_age_s < $early or (l.victim_run > 1 and l.run_age_s < w.warmup_s + $g) as is_early
from preemption_ledger as l
left join warm as w using (victim_job_id)
where l.cluster = $c and l.time >= $t0 and l.time < $t1)
select count(*) as n, count(case when is_early then 1 end) as early, coalesce(sum(case when is_early then lost_gpu_s end), 0) / 3600.0 as early_lost
from early
