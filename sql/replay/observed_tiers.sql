-- Per tier, the figures the net is made of among the jobs submitted in the window, as the replay measures them (replay.outcome_figures): the first-start wait's median and p90 (not started: to the window's end), queue GPU-hours (the first wait and every wait to restart, cut at the window's end), work thrown away by the tier's victims (unknown while one's warm-up is not measured) and jobs completed in the window.
with

window_jobs as (
    select j.job_id, j.tier, j.gpus, j.submit_time
    from jobs as j
    where j.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1
),

first_waits as (
    select
        w.tier,
        least(coalesce(epoch(r.start_time), epoch(cast($t1 as timestamptz))), epoch(cast($t1 as timestamptz)))
            - epoch(w.submit_time) as wait_s,
        w.gpus
    from window_jobs as w
    left join job_runs as r on r.cluster = $c and r.job_id = w.job_id and r.run = 1
),

restart_waits as (
    -- a restart waits from its requeue to its start, both cut at the window's end
    select
        w.tier,
        sum(w.gpus * greatest(0, least(coalesce(epoch(r.start_time), epoch(cast($t1 as timestamptz))),
            epoch(cast($t1 as timestamptz))) - least(epoch(r.submit_time), epoch(cast($t1 as timestamptz)))))
            as gpu_s
    from window_jobs as w
    inner join job_runs as r on r.cluster = $c and r.job_id = w.job_id and r.run > 1
    where r.submit_time is not null
    group by w.tier
),

last_runs as (
    select w.tier, arg_max(r.state, r.run) as state, arg_max(r.end_time, r.run) as end_time
    from window_jobs as w
    inner join job_runs as r on r.cluster = $c and r.job_id = w.job_id
    group by w.job_id, w.tier
),

completed as (
    select tier, count(*) as n
    from last_runs
    where state = 'completed' and end_time <= cast($t1 as timestamptz)
    group by tier
),

thrown as (
    select
        j.tier,
        case when count(l.warmup_s) = count(*) then sum(l.lost_gpu_s + l.victim_gpus * l.warmup_s) / 3600.0 end
            as gpu_h
    from preemption_ledger as l
    inner join window_jobs as j on j.job_id = l.victim_job_id
    where l.cluster = $c and l.time < $t1
    group by j.tier
),

waits as (
    select
        tier,
        median(wait_s) as wait_p50_s,
        quantile_cont(wait_s, 0.9) as wait_p90_s,
        sum(gpus * wait_s) as first_gpu_s
    from first_waits
    group by tier
),

final as (
    select
        w.tier,
        w.wait_p50_s,
        w.wait_p90_s,
        (w.first_gpu_s + coalesce(r.gpu_s, 0)) / 3600.0 as queue_gpu_h,
        coalesce(t.gpu_h, case when t.tier is null then 0.0 end) as thrown_away_gpu_h,
        coalesce(c.n, 0) as completed
    from waits as w
    left join restart_waits as r on r.tier = w.tier
    left join thrown as t on t.tier = w.tier
    left join completed as c on c.tier = w.tier
)

select * from final order by tier
