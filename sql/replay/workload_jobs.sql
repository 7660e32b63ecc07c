-- The jobs submitted in the window, one row each, with what the replay needs to run them again.
with
window_jobs as (
    select * from jobs where cluster = $c and submit_time >= $t0 and submit_time < $t1
),
runs as (
    select * from stg_runs where cluster = $c
),
run_totals as (
    select
        job_id,
        sum(effective_s) as run_s,
        arg_max(state, run) as last_state,
        arg_max(pool, run) as last_pool,
        bool_or(end_time is null) as still_running,
        count(*) as runs
    from runs
    group by job_id
),
waste as (
    -- the warm-up as measured (restart_warmup_s), also where the ledger charges it to the restart's own loss
    select
        victim_job_id as job_id,
        sum(lost_s + coalesce(warmup_s, 0)) as waste_s,
        median(restart_warmup_s) as warmup_s,
        -- a first run preempted before its first checkpoint lost its whole run, start-up included
        bool_or(victim_run = 1 and last_checkpoint_time is null) as startup_lost
    from stg_preemptions
    where cluster = $c
    group by victim_job_id
),
final_saves as (
    -- a preempted run's last checkpoint within the grace time of its end: possibly a save at the
    -- signal, off the cadence, so it is no evidence of the interval
    select victim_job_id as job_id, victim_run as run, last_checkpoint_time as time
    from preemption_ledger
    where cluster = $c and epoch(time) - epoch(last_checkpoint_time) between 0 and $g
),
first_steps as (
    -- the first run's reports of progress (progress or checkpoint rows with a step), the first time each step
    -- was reached
    select c.job_id, c.step, min(c.time) as time
    from checkpoints as c
    inner join runs as r on r.job_id = c.job_id and r.run = 1
    where c.cluster = $c and c.step is not null and c.step > 0
        and (c.run = 1 or (c.run is null and c.time >= r.start_time and (r.end_time is null or c.time <= r.end_time)))
    group by c.job_id, c.step
),
first_report as (
    select job_id, step, time, row_number() over (partition by job_id order by step) as nth
    from first_steps
),
job_rates as (
    -- steps per second of work, from consecutive advancing reports of any run; a pair from a run's first report
    -- may span its start-up or warm-up, so it does not count
    select job_id, median(rate) as rate
    from (
        select
            job_id,
            (step - lag(step) over w) / (epoch(time) - epoch(lag(time) over w)) as rate,
            lag(step) over w > min(step) over (partition by job_id, run) as after_first
        from checkpoints
        where cluster = $c and step is not null
        window w as (partition by job_id, run order by time, step)
    ) as pairs
    where rate > 0 and after_first
    group by job_id
),
startup as (
    -- a first run's start-up: from its start to its work's beginning, its first report of progress taken back
    -- to step 0 at the job's rate (a run preempted after one report still shows it)
    select
        a.job_id,
        least(greatest(0, epoch(a.time) - a.step / jr.rate - epoch(r.start_time)),
            epoch(a.time) - epoch(r.start_time)) as startup_s
    from first_report as a
    inner join job_rates as jr on jr.job_id = a.job_id
    inner join runs as r on r.job_id = a.job_id and r.run = 1
    where a.nth = 1
),
ckpt_seq as (
    select
        job_id, run, time,
        lag(time) over (partition by job_id, run order by time) as previous_time
    from checkpoints
    where cluster = $c and kind = 'checkpoint'
),
ckpt_gaps as (
    -- spacing of checkpoints within a run, and a first run's first checkpoint after its work began (its
    -- start plus its start-up): a job with one checkpoint per run still shows its cadence. Measured from the
    -- start alone, that first gap holds the start-up too: it counts only when the job shows no other gap.
    select
        k.job_id,
        epoch(k.time) - case when k.previous_time is not null then epoch(k.previous_time)
            else epoch(r.start_time) + coalesce(su.startup_s, 0) end as gap,
        k.previous_time is null and su.startup_s is null as biased
    from ckpt_seq as k
    inner join runs as r on r.job_id = k.job_id and r.run = k.run
    left join startup as su on su.job_id = k.job_id
    left join final_saves as f on f.job_id = k.job_id and f.run = k.run and f.time = k.time
    where f.job_id is null and (k.previous_time is not null or k.run = 1)
),
cadence as (
    select job_id, coalesce(median(gap) filter (where not biased), median(gap)) as interval_s
    from ckpt_gaps where gap > 0 group by job_id
),
resumed as (
    -- a completed restart of a job whose warm-up the ledger could not measure, and the step it resumed
    -- from (the last checkpoint before it started)
    select r.job_id, r.run, r.start_time, r.end_time, arg_max(c.step, c.time) as step
    from runs as r
    left join checkpoints as c
        on c.cluster = $c and c.job_id = r.job_id and c.kind = 'checkpoint' and c.time < r.start_time
    where r.run > 1 and r.state = 'completed'
        and r.job_id not in (select job_id from waste where warmup_s is not null)
    group by r.job_id, r.run, r.start_time, r.end_time
),
rates as (
    -- progress per second of work: `step` is the job's own counter, not necessarily seconds
    select job_id, median(rate) as rate
    from (
        select
            job_id,
            (step - lag(step) over w) / (epoch(time) - epoch(lag(time) over w)) as rate
        from checkpoints
        where cluster = $c and step is not null and job_id in (select job_id from resumed where step is not null)
        window w as (partition by job_id, run order by time, step)
    ) as pairs
    where rate > 0
    group by job_id
),
idle as (
    select job_id, run, start_time, end_time, max(idle_s) as idle_s
    from hoarding_stretches
    where cluster = $c
    group by job_id, run, start_time, end_time
),
late_warmup as (
    -- a restart too short for two progress reports: its run time less the work it had left
    select m.job_id, median(epoch(m.end_time) - epoch(m.start_time) - (j.work_s - coalesce(m.step / p.rate, 0)))
        as warmup_s
    from resumed as m
    inner join window_jobs as j on j.job_id = m.job_id
    left join rates as p on p.job_id = m.job_id
    where j.work_s is not null and (m.step is null or p.rate is not null)
        and m.job_id not in (select job_id from idle)
    group by m.job_id
),
idle_seq as (
    select
        i.*,
        lag(i.end_time) over (partition by i.job_id, i.run order by i.start_time) as previous_end,
        r.start_time as run_start,
        r.run > 1 as restarted,
        -- cut short by the run's end (preemption or end of data): a lower bound of the stretch only
        r.end_time is null or i.end_time >= r.end_time as truncated
    from idle as i
    inner join runs as r on r.job_id = i.job_id and r.run = i.run
),
active_spans as (
    -- active time before an idle stretch: from the run's work start (after the warm-up of a
    -- restart) or from the previous stretch's end. The engine starts idling on the sample grid
    -- after that time, so each span overshoots the job's active time by less than one step:
    -- the shortest span reproduces every observed idle start.
    select
        s.job_id,
        case
            when s.previous_end is not null then epoch(s.start_time) - epoch(s.previous_end)
            else epoch(s.start_time) - epoch(s.run_start)
                - case when s.restarted then coalesce(w.warmup_s, 0) else coalesce(su.startup_s, 0) end
        end as active_s
    from idle_seq as s
    left join waste as w on w.job_id = s.job_id
    left join startup as su on su.job_id = s.job_id
),
idle_totals as (
    select
        s.job_id,
        sum(s.idle_s) as idle_total_s,
        coalesce(median(case when not s.truncated then s.idle_s end), max(s.idle_s)) as idle_median_s,
        any_value(a.active_s) as active_s
    from idle_seq as s
    left join (select job_id, min(active_s) as active_s from active_spans group by job_id) as a
        on a.job_id = s.job_id
    group by s.job_id
)
select
    j.job_id, j.name, j.team, j.user_name, j.priority_class, j.priority_value, j.tier, j.preemptible,
    coalesce(j.pool, t.last_pool) as pool, j.gpus,
    epoch(j.submit_time) - epoch(cast($t0 as timestamptz)) as submit_s,
    j.checkpoint_interval_s as declared_interval_s, c.interval_s as measured_interval_s,
    j.work_s, j.time_limit_s, j.time_unlimited, t.run_s, t.runs, t.last_state, coalesce(t.still_running, false) as still_running,
    coalesce(w.waste_s, 0) as waste_s, coalesce(w.startup_lost, false) as startup_lost,
    coalesce(w.warmup_s, case when lw.warmup_s >= 0 then lw.warmup_s end) as warmup_s,
    -- without two progress reports, a job that declares its work and ran once to completion shows its start-up
    -- as the rest of its run
    coalesce(su.startup_s, case when t.runs = 1 and t.last_state = 'completed' and j.work_s is not null
        then greatest(0, t.run_s - j.work_s - coalesce(i.idle_total_s, 0)) end) as startup_s,
    coalesce(i.idle_total_s, 0) as idle_total_s, i.idle_median_s, i.active_s as hoard_active_s
from window_jobs as j
left join run_totals as t on t.job_id = j.job_id
left join waste as w on w.job_id = j.job_id
left join cadence as c on c.job_id = j.job_id
left join idle_totals as i on i.job_id = j.job_id
left join late_warmup as lw on lw.job_id = j.job_id
left join startup as su on su.job_id = j.job_id
order by j.submit_time, length(j.job_id), j.job_id
