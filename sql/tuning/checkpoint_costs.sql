-- Per team: the median time its checkpoints' saves took where a source timed them (save_s; a save timed at 0 s, such as a marker with no duration, says nothing of the cost), over the runs that started in the window, and how many saves that is.
select r.team, median(c.save_s) as save_s, count(*) as saves
from stg_runs as r
inner join checkpoints as c
    on c.cluster = r.cluster and c.job_id = r.job_id and c.kind = 'checkpoint' and c.save_s > 0
    and saves_run(c.run, c.time, r.run, r.start_time, r.effective_end)
where r.cluster = $c and r.preemptible and r.start_time >= $t0 and r.start_time < $t1
group by r.team
order by r.team
