-- Per cluster, each measure behind the four readiness questions with its threshold, whether it passes, and whether its question needs it to pass (rule 'all') or needs one of its 'any' measures to pass; a measure the data cannot give is null (passes null) with the missing input named.
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

gains as (
    select * from preemption_gains
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

sources as (
    -- Q3: whether the cluster's checkpoint and progress data was collected at all (progress_sources)
    select * from progress_sources
),

span as (
    select cluster, min(effective_start) as data_start, max(data_end) as data_end
    from runs
    group by cluster
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

run_hours as (
    -- each run once for every hour it overlaps: summed per hour, without
    -- pairing every hour with every run
    select
        cluster,
        gpus,
        effective_start,
        effective_end,
        unnest(generate_series(date_trunc('hour', effective_start), effective_end, interval 1 hour)) as hour
    from runs
),

allocated as (
    select
        cluster,
        hour,
        sum(gpus * greatest(0, epoch(least(effective_end, hour + interval 1 hour)) - epoch(greatest(effective_start, hour))))
            as allocated_gpu_s
    from run_hours
    group by cluster, hour
),

queued as (
    -- every run's time in the queue (eligible, or submitted, until it started; never started: until
    -- the data's end), including the runs that never started, which stg_runs leaves out
    select
        r.cluster,
        r.gpus,
        greatest(r.submit_time, coalesce(r.eligible_time, r.submit_time)) as wait_start,
        coalesce(r.start_time, d.data_end) as wait_end
    from job_runs as r
    inner join span as d on d.cluster = r.cluster
    where r.submit_time is not null and coalesce(r.start_time, d.data_end) > r.submit_time
),

queued_hours as (
    select
        cluster,
        gpus,
        wait_start,
        wait_end,
        unnest(generate_series(date_trunc('hour', wait_start), wait_end, interval 1 hour)) as hour
    from queued
),

waiting as (
    select
        cluster,
        hour,
        sum(gpus * greatest(0, epoch(least(wait_end, hour + interval 1 hour)) - epoch(greatest(wait_start, hour))))
            as waiting_gpu_s
    from queued_hours
    group by cluster, hour
),

idle_hours as (
    select
        cluster,
        start_time,
        end_time,
        unnest(generate_series(date_trunc('hour', start_time), end_time, interval 1 hour)) as hour
    from hoarding
),

idle_per_hour as (
    select
        cluster,
        hour,
        sum(greatest(0, epoch(least(end_time, hour + interval 1 hour)) - epoch(greatest(start_time, hour))))
            as hoarded_gpu_s
    from idle_hours
    group by cluster, hour
),

sampled as (
    -- hoarding is known only where GPU samples were collected
    select cluster from gpu_samples group by cluster
),

scarcity as (
    select
        c.cluster,
        avg(case when (coalesce(a.allocated_gpu_s, 0) - coalesce(i.hoarded_gpu_s, 0)) / c.capacity_gpu_s
            >= p.scarce_allocation_share then 1.0 else 0.0 end) as busy_hours_share,
        avg(case when coalesce(w.waiting_gpu_s, 0) / c.capacity_gpu_s >= p.scarce_queue_share
            then 1.0 else 0.0 end) as queue_pressure_hours_share
    from capacity as c
    cross join params as p
    left join allocated as a on a.cluster = c.cluster and a.hour = c.hour
    left join idle_per_hour as i on i.cluster = c.cluster and i.hour = c.hour
    left join waiting as w on w.cluster = c.cluster and w.hour = c.hour
    where c.capacity_gpu_s > 0
    group by c.cluster
),

lower_tier_wait as (
    select cluster, median(wait_s) as lower_tier_wait_p50_s
    from job_first_waits
    group by cluster
),

high_wait as (
    -- the wait critical and high runs would have had without preemption: a preemptor's run until its
    -- counterfactual start, every other run until its actual start
    select
        r.cluster,
        median(greatest(0, epoch(coalesce(g.counterfactual_start, r.start_time)) - epoch(r.submit_time)))
            as high_wait_unpreempted_p50_s
    from runs as r
    left join gains as g
        on g.cluster = r.cluster and g.preemptor_job_id = r.job_id and g.preemptor_run = r.run
    where r.tier in ('critical', 'high') and r.submit_time is not null
    group by r.cluster
),

weekly_high as (
    select
        cluster,
        date_trunc('week', effective_start) as week,
        sum(case when tier in ('critical', 'high') then gpus * effective_s else 0 end)
            / nullif(sum(gpus * effective_s), 0) as high_share
    from runs
    group by all
),

high_trend as (
    select
        w.cluster,
        case when count(*) >= 2
            then regr_slope(w.high_share, (epoch(w.week) - epoch(l.last_week)) / 604800) end as high_share_slope
    from weekly_high as w
    inner join (select cluster, max(week) as last_week from weekly_high group by cluster) as l
        on l.cluster = w.cluster
    cross join params as p
    where w.week > l.last_week - to_days(7 * p.trend_weeks)
    group by w.cluster
),

usage as (
    select
        r.cluster,
        sum(case when r.tier in ('critical', 'high') then r.gpus * r.effective_s else 0 end)
            / nullif(sum(r.gpus * r.effective_s), 0) as high_gpu_hour_share,
        sum(case when r.preemptible and (c.job_id is not null or r.checkpoint_interval_s is not null)
            then r.gpus * r.effective_s else 0 end)
            / nullif(sum(case when r.preemptible then r.gpus * r.effective_s else 0 end), 0) as checkpoint_coverage,
        sum(r.gpus * r.effective_s) as allocated_gpu_s
    from runs as r
    left join ckpt_jobs as c on c.cluster = r.cluster and c.job_id = r.job_id
    group by r.cluster
),

preemption_figures as (
    select
        cluster,
        -- Q3: over the preemptions whose gain is known and whose loss is measured, not assumed
        sum(case when gain_gpu_s is not null and is_measured(basis) then wasted_gpu_s end)
            / nullif(sum(case when is_measured(basis) then gain_gpu_s end), 0) as loss_to_gain,
        count(case when gain_gpu_s is not null and is_measured(basis) then 1 end)
            / nullif(count(gain_gpu_s), 0) as gained_measured_share,
        avg(case when reason is not null and preemptor_job_id is not null then 1.0 else 0.0 end) as visibility
    from ledger
    group by cluster
),

idle as (
    select cluster, sum(idle_s) as hoarded_gpu_s from hoarding group by cluster
),

inputs as (
    -- which inputs each cluster's data has: a measure that needs a missing one is unknown, never 0
    select
        u.cluster,
        u.cluster in (select cluster from pools_) as has_pools,
        u.cluster in (select cluster from sampled) as has_samples,
        u.cluster in (select cluster from gains) as has_gains
    from usage as u
),

measures as (
    select k.cluster, 1 as question_no, 'queue_pressure_hours_share' as measure,
        case when k.has_pools then coalesce(s.queue_pressure_hours_share, 0) end as value,
        p.scarce_hours_share as threshold, '>=' as comparison, 'any' as rule,
        case when not k.has_pools then 'no pools rows: capacity unknown' end as missing
    from inputs as k cross join params as p left join scarcity as s on s.cluster = k.cluster
    union all
    select k.cluster, 1, 'busy_hours_share',
        case when k.has_pools and k.has_samples then coalesce(s.busy_hours_share, 0) end,
        p.scarce_hours_share, '>=', 'all',
        nullif(concat_ws('; ',
            case when not k.has_pools then 'no pools rows: capacity unknown' end,
            case when not k.has_samples then 'no GPU samples: hoarding unknown' end), '')
    from inputs as k cross join params as p left join scarcity as s on s.cluster = k.cluster
    union all
    select k.cluster, 1, 'lower_tier_wait_p50_s', w.lower_tier_wait_p50_s, p.scarce_queue_wait_s, '>=', 'any',
        case when w.lower_tier_wait_p50_s is null then 'no normal or low jobs: their wait unknown' end
    from inputs as k cross join params as p left join lower_tier_wait as w on w.cluster = k.cluster
    union all
    select k.cluster, 1, 'high_wait_unpreempted_p50_s',
        case when k.has_pools or not k.has_gains then w.high_wait_unpreempted_p50_s end,
        p.scarce_high_wait_s, '>=', 'any',
        case
            when k.has_gains and not k.has_pools then 'no pools rows: capacity unknown'
            when w.high_wait_unpreempted_p50_s is null then 'no critical or high runs: their wait unknown'
        end
    from inputs as k cross join params as p left join high_wait as w on w.cluster = k.cluster
    union all
    select k.cluster, 2, 'high_gpu_hour_share', u.high_gpu_hour_share, p.high_tier_share_max, '<=', 'all',
        case when u.high_gpu_hour_share is null then 'no GPU-hours allocated' end
    from inputs as k cross join params as p inner join usage as u on u.cluster = k.cluster
    union all
    select k.cluster, 2, 'high_share_weekly_slope_abs', abs(t.high_share_slope), p.high_tier_slope_max, '<=', 'all',
        case when t.high_share_slope is null then 'fewer than two weeks of runs: trend unknown' end
    from inputs as k cross join params as p left join high_trend as t on t.cluster = k.cluster
    union all
    -- Without any checkpoint or progress data the coverage counts only declared intervals, a lower bound:
    -- enough when it already passes, else unknown ("not collected"), never a "no" ("jobs checkpoint rarely")
    select k.cluster, 3, 'checkpoint_coverage',
        case when s.collected or u.checkpoint_coverage >= p.checkpoint_coverage_min then u.checkpoint_coverage end,
        p.checkpoint_coverage_min, '>=', 'all',
        case
            when u.checkpoint_coverage is null then 'no preemptible runs: checkpoint coverage unknown'
            when not s.collected and u.checkpoint_coverage < p.checkpoint_coverage_min then s.missing
        end
    from inputs as k cross join params as p inner join usage as u on u.cluster = k.cluster
    inner join sources as s on s.cluster = k.cluster
    union all
    select k.cluster, 3, 'loss_to_gain',
        case when k.has_pools and f.gained_measured_share >= p.loss_coverage_min then f.loss_to_gain end,
        p.loss_to_gain_max, '<=', 'all',
        case
            when f.gained_measured_share is null then 'no preemptions with a known gain: loss to gain unknown'
            when not k.has_pools then 'no pools rows: capacity unknown'
            when f.gained_measured_share < p.loss_coverage_min then coalesce(s.missing,
                'loss measured for ' || cast(round(100 * f.gained_measured_share) as integer)
                || '% of the preemptions with a known gain (needs '
                || cast(round(100 * p.loss_coverage_min) as integer) || '%): their victims wrote no checkpoint '
                || 'or progress report the collectors found (`preemptlens collect checkpoints`)')
            when f.loss_to_gain is null then 'no gain from preemptions whose loss is measured: loss to gain unknown'
        end
    from inputs as k cross join params as p left join preemption_figures as f on f.cluster = k.cluster
    inner join sources as s on s.cluster = k.cluster
    union all
    select k.cluster, 4, 'visibility', f.visibility, p.visibility_min, '>=', 'all',
        case when f.visibility is null then 'no preemptions: visibility unknown' end
    from inputs as k cross join params as p left join preemption_figures as f on f.cluster = k.cluster
    union all
    select k.cluster, 0, 'hoarded_share_of_allocated',
        case when k.has_samples then coalesce(i.hoarded_gpu_s, 0) / nullif(u.allocated_gpu_s, 0) end,
        p.reclaim_idle_share, '<=', 'all',
        case when not k.has_samples then 'no GPU samples: hoarding unknown' end
    from inputs as k cross join params as p inner join usage as u on u.cluster = k.cluster
    left join idle as i on i.cluster = k.cluster
),

final as (
    select
        cluster,
        question_no,
        measure,
        value,
        threshold,
        comparison,
        rule,
        case
            when value is null then null
            when comparison = '>=' then value >= threshold
            else value <= threshold
        end as passes,
        missing
    from measures
)

select * from final
