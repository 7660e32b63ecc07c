-- The team's preemptions in the window whose loss is measured: what each lost, and when the victim's run and its work (after the warm-up of a restart) began, to replay the loss under another checkpoint interval.
select
    l.victim_job_id as job_id,
    l.victim_gpus as gpus,
    epoch(l.time) as time_s,
    epoch(l.run_start) as run_start_s,
    epoch(l.run_start) + coalesce(b.warmup_s, 0) as work_start_s,
    l.lost_s
from preemption_ledger as l
left join preemption_ledger as b
    on b.cluster = l.cluster and b.victim_job_id = l.victim_job_id and b.restart_run = l.victim_run
where l.cluster = $c and l.time >= $t0 and l.time < $t1 and l.victim_team = $team and is_measured(l.basis)
order by l.time, l.victim_job_id
