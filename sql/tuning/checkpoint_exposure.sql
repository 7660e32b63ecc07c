-- Per team: seconds its preemptible checkpointing runs ran in the window, and how often its jobs were preempted.
with runs_ as (select team, sum(effective_s) as run_s
from stg_runs
where cluster = $c and preemptible and start_time >= $t0 and start_time < $t1 and checkpoint_interval_s is not null
group by team), victims as (select victim_team as team, count(*) as n
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1
group by victim_team)
select r.team, r.run_s, coalesce(v.n, 0) as n
from runs_ as r
left join victims as v using (team)
order by r.team
