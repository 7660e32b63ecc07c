-- Per team: seconds (and GPU-seconds) its preemptible checkpointing runs (a measured cadence, or a declared interval) ran in the window, and how often its jobs were preempted.
with ckpt_jobs as (select distinct job_id
from checkpoints
where cluster = $c and kind = 'checkpoint'), runs_ as (select team, sum(effective_s) as run_s, sum(gpus * effective_s) as gpu_s
from stg_runs
where cluster = $c and preemptible and start_time >= $t0 and start_time < $t1
    and (checkpoint_interval_s is not null or job_id in (select job_id from ckpt_jobs))
group by team), victims as (select victim_team as team, count(*) as n
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1
group by victim_team)
select r.team, r.run_s, r.gpu_s, coalesce(v.n, 0) as n
from runs_ as r
left join victims as v using (team)
order by r.team
