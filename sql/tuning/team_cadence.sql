-- Per team: how many of its checkpointing jobs submitted in the window have a checkpoint cadence measured from their checkpoints, and how many only declare one.
with ckpt_jobs as (select distinct job_id from checkpoints where cluster = $c and kind = 'checkpoint')
select
    coalesce(j.team, '(none)') as team,
    count(case when c.job_id is not null then 1 end) as measured,
    count(case when c.job_id is null and j.checkpoint_interval_s is not null then 1 end) as declared
from jobs as j
left join ckpt_jobs as c on c.job_id = j.job_id
where j.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1
group by all
order by team
