-- Per cluster, each measure behind the four readiness questions with its threshold, its bootstrap interval over days, whether it passes, whether it is borderline (its interval holds the threshold), and whether its question needs it to pass (rule 'all') or needs one of its 'any' measures to pass; a measure the data cannot give is null (passes null) with the missing input named; rule 'info' rows are reported, never scored.
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

gains as (
    select * from preemption_gains
),

days as (
    select * from readiness_days
),

intervals as (
    select * from readiness_intervals
),

sampled as (
    -- hoarding is known only where GPU samples were collected
    select cluster from gpu_samples group by cluster
),

ratios as (
    select cluster, measure, sum(num) / nullif(sum(den), 0) as value
    from days
    where kind = 'ratio'
    group by cluster, measure
),

week_shares as (
    select cluster, measure, week, sum(num) / nullif(sum(den), 0) as share
    from days
    where kind = 'slope'
    group by cluster, measure, week
),

slopes as (
    select s.cluster, s.measure, abs(regr_slope(s.share, epoch(s.week) / 604800.0)) as value, count(s.share) as weeks
    from week_shares as s
    group by s.cluster, s.measure
),

sources as (
    -- Q3: whether the cluster's checkpoint and progress data was collected at all (progress_sources)
    select * from progress_sources
),

preemption_figures as (
    -- Q3: the share of the preemptions with a known gain whose loss is measured, not assumed
    select
        cluster,
        count(case when gain_gpu_s is not null and is_measured(basis) then 1 end)
            / nullif(count(gain_gpu_s), 0) as gained_measured_share
    from preemption_ledger
    group by cluster
),

never_fit as (
    -- jobs that ask for more GPUs than their pool ever had: they can never start, so Q1 leaves them out
    select j.cluster, count(*) as jobs
    from jobs as j
    inner join (select cluster, pool, max(gpus) as max_gpus from pools_ group by cluster, pool) as s
        on s.cluster = j.cluster and s.pool = j.pool
    where j.gpus > s.max_gpus
    group by j.cluster
),

inputs as (
    -- which inputs each cluster's data has: a measure that needs a missing one is unknown, never 0
    select
        s.cluster,
        s.cluster in (select cluster from pools_) as has_pools,
        s.cluster in (select cluster from sampled) as has_samples,
        s.cluster in (select cluster from gains) as has_gains,
        s.cluster in (select cluster from preemption_ledger) as has_preemptions,
        s.cluster in (select cluster from counterfactual_hours) as has_plain_queue
    from (select distinct cluster from runs) as s
),

value_of as (
    select k.cluster, m.measure, r.value
    from inputs as k
    cross join (select distinct measure from days) as m
    left join ratios as r on r.cluster = k.cluster and r.measure = m.measure
),

measures as (
    select k.cluster, 1 as question_no, 'busy_hours_share' as measure,
        case when k.has_pools and k.has_samples and k.has_plain_queue then coalesce(v.value, 0) end as value,
        p.scarce_hours_share as threshold, '>=' as comparison, 'all' as rule,
        nullif(concat_ws('; ',
            case when not k.has_pools then 'no pools rows: capacity unknown' end,
            case when not k.has_samples then 'no GPU samples: hoarding unknown' end,
            case when k.has_pools and not k.has_plain_queue
                then 'no replay without preemption: plain-queue busy hours unknown' end), '') as missing
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'busy_hours_share'
    union all
    -- busy hours with the idle-hoarded GPUs counted as busy: reported beside Q1 (never scored), so that a "no" that
    -- comes from taking them out says so (scorecard.answer_text)
    select k.cluster, 1, 'busy_hours_share_with_idle',
        case when k.has_pools and k.has_samples and k.has_plain_queue then coalesce(v.value, 0) end,
        p.scarce_hours_share, '>=', 'info',
        case when not (k.has_pools and k.has_samples and k.has_plain_queue) then 'busy hours unknown' end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'busy_hours_share_with_idle'
    union all
    select k.cluster, 1, 'queue_pressure_hours_share',
        case when k.has_pools then coalesce(v.value, 0) end,
        p.scarce_hours_share, '>=', 'any',
        case when not k.has_pools then 'no pools rows: capacity unknown' end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'queue_pressure_hours_share'
    union all
    select k.cluster, 1, 'queued_gpu_wait_s', v.value, p.scarce_queue_wait_s, '>=', 'any',
        case when v.value is null then 'no runs with a submit time: queue wait unknown' end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'queued_gpu_wait_s'
    union all
    select k.cluster, 1, 'jobs_never_fit', case when k.has_pools then coalesce(n.jobs, 0)::double end, null, null, 'info',
        case when not k.has_pools then 'no pools rows: capacity unknown' end
    from inputs as k left join never_fit as n on n.cluster = k.cluster
    union all
    select k.cluster, 2, 'high_gpu_hour_share', v.value, p.high_tier_share_max, '<=', 'all',
        case when v.value is null then 'no GPU-hours allocated' end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'high_gpu_hour_share'
    union all
    select k.cluster, 2, 'high_share_weekly_slope_abs',
        case when s.weeks >= p.trend_min_weeks then s.value end, p.high_tier_slope_max, '<=', 'all',
        case when coalesce(s.weeks, 0) < p.trend_min_weeks then 'fewer than ' || p.trend_min_weeks
            || ' weeks of submissions: trend unknown' end
    from inputs as k cross join params as p
    left join slopes as s on s.cluster = k.cluster and s.measure = 'high_share_weekly_slope_abs'
    union all
    -- Without any checkpoint or progress data the coverage counts only declared intervals, a lower bound:
    -- enough when it already passes, else unknown ("not collected"), never a "no" ("jobs checkpoint rarely")
    select k.cluster, 3, 'checkpoint_coverage',
        case when s.collected or v.value >= p.checkpoint_coverage_min then v.value end,
        p.checkpoint_coverage_min, '>=', 'all',
        case
            when v.value is null then 'no preemptible runs: checkpoint coverage unknown'
            when not s.collected and v.value < p.checkpoint_coverage_min then s.missing
        end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'checkpoint_coverage'
    inner join sources as s on s.cluster = k.cluster
    union all
    select k.cluster, 3, 'loss_to_gain',
        case when k.has_pools and f.gained_measured_share >= p.loss_coverage_min then v.value end,
        p.loss_to_gain_max, '<=', 'all',
        case
            when f.gained_measured_share is null then 'no preemptions with a known gain: loss to gain unknown'
            when not k.has_pools then 'no pools rows: capacity unknown'
            when f.gained_measured_share < p.loss_coverage_min then coalesce(s.missing,
                'loss measured for ' || cast(round(100 * f.gained_measured_share) as integer)
                || '% of the preemptions with a known gain (needs '
                || cast(round(100 * p.loss_coverage_min) as integer) || '%): their victims wrote no checkpoint '
                || 'or progress report the collectors found (`preemptlens collect checkpoints`)')
            when v.value is null then 'no gain from preemptions whose loss is measured: loss to gain unknown'
        end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'loss_to_gain'
    left join preemption_figures as f on f.cluster = k.cluster
    inner join sources as s on s.cluster = k.cluster
    union all
    select k.cluster, 4, 'visibility', v.value, p.visibility_min, '>=', 'all',
        case when v.value is null then 'no preemptions: visibility unknown' end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'visibility'
    union all
    select k.cluster, 0, 'hoarded_share_of_allocated',
        case when k.has_samples then coalesce(v.value, 0) end,
        p.reclaim_idle_share, '<=', 'all',
        case when not k.has_samples then 'no GPU samples: hoarding unknown' end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'hoarded_share_of_allocated'
    union all
    select k.cluster, 0, 'avoidable_share',
        case when k.has_samples and k.has_preemptions then coalesce(v.value, 0) end,
        p.avoidable_share_max, '<=', 'all',
        case
            when not k.has_samples then 'no GPU samples: hoarding unknown'
            when not k.has_preemptions then 'no preemptions: avoidable share unknown'
        end
    from inputs as k cross join params as p
    left join value_of as v on v.cluster = k.cluster and v.measure = 'avoidable_share'
),

final as (
    select
        m.cluster,
        m.question_no,
        m.measure,
        m.value,
        case when m.value is not null then i.low end as low,
        case when m.value is not null then i.high end as high,
        m.threshold,
        m.comparison,
        m.rule,
        case
            when m.value is null or m.rule = 'info' then null
            when m.comparison = '>=' then m.value >= m.threshold
            else m.value <= m.threshold
        end as passes,
        -- a measure whose interval holds its threshold could read either way on other days like these
        coalesce(m.value is not null and m.rule <> 'info' and i.low < i.high
            and i.low <= m.threshold and m.threshold <= i.high, false) as borderline,
        m.missing
    from measures as m
    left join intervals as i on i.cluster = m.cluster and i.measure = m.measure
)

select * from final
