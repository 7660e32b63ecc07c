-- Per cluster, each measured number behind the four readiness questions with its threshold and whether it passes (null when the data cannot measure it).
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

scarcity as (
    select
        c.cluster,
        avg(case when coalesce(a.allocated_gpu_s, 0) / c.capacity_gpu_s >= p.scarce_allocation_share
            then 1.0 else 0.0 end) as scarce_hours_share,
        max(p.scarce_hours_share) as threshold
    from capacity as c
    cross join params as p
    left join allocated as a on a.cluster = c.cluster and a.hour = c.hour
    where c.capacity_gpu_s > 0
    group by c.cluster
),

high_wait as (
    select cluster, median(epoch(start_time) - epoch(submit_time)) as high_wait_p50_s
    from runs
    where tier in ('critical', 'high') and submit_time is not null
    group by cluster
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
        sum(case when gain_gpu_s is not null then lost_gpu_s + warmup_gpu_s end)
            / nullif(sum(gain_gpu_s), 0) as loss_to_gain,
        avg(case when reason is not null and preemptor_job_id is not null then 1.0 else 0.0 end) as visibility
    from ledger
    group by cluster
),

idle as (
    select cluster, sum(idle_s) as hoarded_gpu_s from hoarding group by cluster
),

measures as (
    select u.cluster, 1 as question_no, 'scarce_hours_share' as measure, s.scarce_hours_share as value,
        p.scarce_hours_share as threshold, '>=' as comparison
    from usage as u cross join params as p left join scarcity as s on s.cluster = u.cluster
    union all
    select u.cluster, 1, 'high_wait_p50_s', w.high_wait_p50_s, p.scarce_wait_s, '>='
    from usage as u cross join params as p left join high_wait as w on w.cluster = u.cluster
    union all
    select u.cluster, 2, 'high_gpu_hour_share', u.high_gpu_hour_share, p.high_tier_share_max, '<='
    from usage as u cross join params as p
    union all
    select u.cluster, 2, 'high_share_weekly_slope_abs', abs(t.high_share_slope), p.high_tier_slope_max, '<='
    from usage as u cross join params as p left join high_trend as t on t.cluster = u.cluster
    union all
    select u.cluster, 3, 'checkpoint_coverage', u.checkpoint_coverage, p.checkpoint_coverage_min, '>='
    from usage as u cross join params as p
    union all
    select u.cluster, 3, 'loss_to_gain', f.loss_to_gain, p.loss_to_gain_max, '<='
    from usage as u cross join params as p left join preemption_figures as f on f.cluster = u.cluster
    union all
    select u.cluster, 4, 'visibility', f.visibility, p.visibility_min, '>='
    from usage as u cross join params as p left join preemption_figures as f on f.cluster = u.cluster
    union all
    select u.cluster, 0, 'hoarded_share_of_allocated', coalesce(i.hoarded_gpu_s, 0) / nullif(u.allocated_gpu_s, 0),
        p.reclaim_idle_share, '<='
    from usage as u cross join params as p left join idle as i on i.cluster = u.cluster
),

final as (
    select
        *,
        case
            when value is null then null
            when comparison = '>=' then value >= threshold
            else value <= threshold
        end as passes
    from measures
)

select * from final
