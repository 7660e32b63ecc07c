-- Per cluster, readiness measure and UTC day, the parts each measure of the scorecard is computed from (kind ratio: the day's numerator and denominator; kind median: one observation; kind slope: the day's numerator and denominator within its week), so that a measure and its bootstrap interval over days come from one definition.
with

params as (
    select * from analytics_params
),

runs as (
    select * from stg_runs
),

pools_ as (
    select * from pools
),

ledger as (
    select * from preemption_ledger
),

hoarding as (
    select * from hoarding_stretches
),

ckpt_jobs as (
    select distinct cluster, job_id from checkpoints where kind = 'checkpoint'
    union
    -- Q3: a job whose restart resumed from a step it first reached after its run began saved a checkpoint there,
    -- whether or not a collector saw the checkpoint itself (basis rollback)
    select distinct cluster, victim_job_id from ledger where basis = 'rollback' and lost_s < run_age_s
),

span as (
    select cluster, min(effective_start) as data_start, max(data_end) as data_end
    from runs
    group by cluster
),

pool_size as (
    -- the most GPUs a pool ever had: a job asking for more can never start in it
    select cluster, pool, max(gpus) as max_gpus
    from pools_
    group by cluster, pool
),

never_fit as (
    select j.cluster, j.job_id
    from jobs as j
    inner join pool_size as s on s.cluster = j.cluster and s.pool = j.pool
    where j.gpus > s.max_gpus
),

hours as (
    select s.cluster, h.hour, h.hour + interval 1 hour as hour_end
    from span as s
    cross join lateral (
        select unnest(generate_series(date_trunc('hour', s.data_start), s.data_end - interval 1 hour, interval 1 hour))
            as hour
    ) as h
),

capacity as (
    select h.cluster, h.hour, sum(p.gpus) * 3600.0 as capacity_gpu_s
    from hours as h
    inner join (
        select
            cluster, pool, gpus, valid_from,
            coalesce(lead(valid_from) over (partition by cluster, pool order by valid_from),
                timestamptz '9999-12-31 00:00:00+00') as valid_to
        from pools_
    ) as p on p.cluster = h.cluster and p.valid_from <= h.hour and p.valid_to > h.hour
    group by h.cluster, h.hour
),

run_submits as (
    -- a first run the source gives no submit time of was submitted with its job
    select
        r.cluster, r.job_id, r.gpus, r.eligible_time, r.start_time,
        coalesce(r.submit_time, case when r.run = 1 then j.submit_time end) as submit_time
    from job_runs as r
    inner join jobs as j on j.cluster = r.cluster and j.job_id = r.job_id
),

queued as (
    -- every run's time in the queue (eligible, or submitted, until it started; never started: until the data's
    -- end), including the runs that never started, which stg_runs leaves out; not the runs of jobs that can
    -- never start in their pool (reported on their own)
    select
        r.cluster,
        r.gpus,
        greatest(r.submit_time, coalesce(r.eligible_time, r.submit_time)) as a,
        coalesce(r.start_time, d.data_end) as b
    from run_submits as r
    inner join span as d on d.cluster = r.cluster
    anti join never_fit as n on n.cluster = r.cluster and n.job_id = r.job_id
    where r.submit_time is not null and coalesce(r.start_time, d.data_end) > r.submit_time
),

waiting as (
    select cluster, hour, sum(gpus * greatest(0, epoch(least(b, hour + interval 1 hour)) - epoch(greatest(a, hour))))
        as waiting_gpu_s
    from (select *, unnest(generate_series(date_trunc('hour', a), b, interval 1 hour)) as hour from queued)
    group by cluster, hour
),

plain_queue as (
    -- the GPUs allocated in each hour when the recorded jobs are replayed without preemption
    -- (analytics/whatif/counterfactual.py): preemption packs GPUs differently and throws work away, so busy hours are
    -- read on the plain queue, the same whatever the policy in force
    select * from counterfactual_hours
),

idle_per_hour as (
    -- the idle GPU-seconds measured (hoarding stretches), which the plain queue's allocation holds too
    select cluster, hour, sum(greatest(0, epoch(least(end_time, hour + interval 1 hour)) - epoch(greatest(start_time, hour))))
        as hoarded_gpu_s
    from (
        select *, unnest(generate_series(date_trunc('hour', start_time), end_time, interval 1 hour)) as hour
        from hoarding
    )
    group by cluster, hour
),

hourly as (
    select
        c.cluster,
        c.hour,
        (coalesce(q.allocated_gpu_s, 0) - coalesce(i.hoarded_gpu_s, 0)) / c.capacity_gpu_s
            >= p.scarce_allocation_share as busy,
        -- the same with the idle-hoarded GPUs counted as busy: what Q1 names when taking them out is what makes it no
        coalesce(q.allocated_gpu_s, 0) / c.capacity_gpu_s >= p.scarce_allocation_share as busy_with_idle,
        coalesce(w.waiting_gpu_s, 0) / c.capacity_gpu_s >= p.scarce_queue_share as pressed
    from capacity as c
    cross join params as p
    left join plain_queue as q on q.cluster = c.cluster and q.hour = c.hour
    left join idle_per_hour as i on i.cluster = c.cluster and i.hour = c.hour
    left join waiting as w on w.cluster = c.cluster and w.hour = c.hour
    where c.capacity_gpu_s > 0
),

job_waits as (
    -- per job, its GPUs and all its time in the queue (first wait and every wait to restart, 0 when it started
    -- at once), by its submission; not the jobs that can never start in their pool
    select
        j.cluster,
        j.submit_time,
        j.gpus,
        sum(greatest(0, epoch(coalesce(r.start_time, d.data_end))
            - epoch(greatest(r.submit_time, coalesce(r.eligible_time, r.submit_time))))) as wait_s
    from jobs as j
    inner join run_submits as r on r.cluster = j.cluster and r.job_id = j.job_id
    inner join span as d on d.cluster = j.cluster
    anti join never_fit as n on n.cluster = j.cluster and n.job_id = j.job_id
    where r.submit_time is not null
    group by j.cluster, j.job_id, j.submit_time, j.gpus
),

submitted as (
    -- demand at submission: the GPUs each job asked for when it was submitted, whatever then ran
    select cluster, submit_time, gpus, tier in ('critical', 'high') as high
    from jobs
),

parts as (
    select cluster, 'busy_hours_share' as measure, 'ratio' as kind, date_trunc('day', hour) as day,
        case when busy then 1.0 else 0.0 end as num, 1.0 as den
    from hourly
    where cluster in (select cluster from plain_queue)
    union all
    select cluster, 'busy_hours_share_with_idle', 'ratio', date_trunc('day', hour),
        case when busy_with_idle then 1.0 else 0.0 end, 1.0
    from hourly
    where cluster in (select cluster from plain_queue)
    union all
    select cluster, 'queue_pressure_hours_share', 'ratio', date_trunc('day', hour),
        case when pressed then 1.0 else 0.0 end, 1.0
    from hourly
    union all
    select cluster, 'queued_gpu_wait_s', 'ratio', date_trunc('day', submit_time), gpus * wait_s, gpus
    from job_waits
    union all
    select cluster, 'high_gpu_hour_share', 'ratio', date_trunc('day', effective_start),
        case when tier in ('critical', 'high') then gpus * effective_s else 0 end, gpus * effective_s
    from runs
    union all
    select cluster, 'high_share_weekly_slope_abs', 'slope', date_trunc('day', submit_time),
        case when high then gpus else 0 end, gpus
    from submitted
    union all
    select r.cluster, 'checkpoint_coverage', 'ratio', date_trunc('day', r.effective_start),
        case when c.job_id is not null or r.checkpoint_interval_s is not null then r.gpus * r.effective_s else 0 end,
        r.gpus * r.effective_s
    from runs as r
    left join ckpt_jobs as c on c.cluster = r.cluster and c.job_id = r.job_id
    where r.preemptible
    union all
    -- Q3: over the preemptions whose gain is known and whose loss is measured, not assumed
    select cluster, 'loss_to_gain', 'ratio', date_trunc('day', time),
        case when gain_gpu_s is not null and is_measured(basis) then wasted_gpu_s else 0 end,
        case when is_measured(basis) then coalesce(gain_gpu_s, 0) else 0 end
    from ledger
    union all
    select cluster, 'visibility', 'ratio', date_trunc('day', time),
        case when reason is not null and preemptor_job_id is not null then 1.0 else 0.0 end, 1.0
    from ledger
    union all
    select cluster, 'avoidable_share', 'ratio', date_trunc('day', time),
        case when avoidable then 1.0 else 0.0 end, 1.0
    from ledger
    where avoidable is not null
    union all
    select cluster, 'hoarded_share_of_allocated', 'ratio', date_trunc('day', start_time), idle_s, 0
    from hoarding
    union all
    select cluster, 'hoarded_share_of_allocated', 'ratio', date_trunc('day', effective_start), 0, gpus * effective_s
    from runs
),

summed as (
    select cluster, measure, kind, day, date_trunc('week', day) as week, sum(num) as num, sum(den) as den
    from parts
    group by all
),

final as (
    -- a trend is fitted over each cluster's last trend_weeks weeks of submissions
    select s.*
    from summed as s
    cross join params as p
    left join (select cluster, max(week) as last_week from summed where kind = 'slope' group by cluster) as l
        on l.cluster = s.cluster
    where s.kind <> 'slope' or s.week > l.last_week - to_days(7 * p.trend_weeks)
)

select * from final
