-- The preemption hazard by run age: for each age band of the preemptible runs (per cluster, and per pool and tier, per tier, per team), the runs that reached the band, the preemptions in it, the runs that left it for another reason or still ran at the data's end (censored), the run-hours spent in it, and the hazard (preemptions per run-hour in the band) with a 95% interval.
with

-- Age bands, in seconds since the run started: narrow where preemptions are frequent (the first hours),
-- wide after. The last band is open.
bands as (
    select * from (
        values
            (0, cast(0 as double), cast(900 as double)),
            (1, 900.0, 3600.0),
            (2, 3600.0, 7200.0),
            (3, 7200.0, 14400.0),
            (4, 14400.0, 28800.0),
            (5, 28800.0, 86400.0),
            (6, 86400.0, 259200.0),
            (7, 259200.0, cast(null as double))
    ) as b (band, age_from_s, age_to_s)
),

runs as (
    -- a run's age at its end, or at the data's end when it still runs (then censored)
    select
        cluster,
        pool,
        tier,
        team,
        gpus,
        effective_s as age_s,
        state = 'preempted' as preempted
    from stg_runs
    where preemptible is distinct from false
),

in_band as (
    select
        r.cluster,
        r.pool,
        r.tier,
        r.team,
        b.band,
        b.age_from_s,
        b.age_to_s,
        r.age_s >= b.age_from_s and (r.age_s > b.age_from_s or b.age_from_s = 0) as at_risk,
        r.preempted and r.age_s >= b.age_from_s and (b.age_to_s is null or r.age_s < b.age_to_s) as event,
        not r.preempted and r.age_s >= b.age_from_s and (b.age_to_s is null or r.age_s < b.age_to_s) as censored,
        greatest(0.0, least(r.age_s, coalesce(b.age_to_s, r.age_s)) - b.age_from_s) as exposure_s,
        r.gpus * greatest(0.0, least(r.age_s, coalesce(b.age_to_s, r.age_s)) - b.age_from_s) as exposure_gpu_s
    from runs as r
    cross join bands as b
    where r.age_s >= b.age_from_s
),

levels as (
    select 'cluster' as level, cluster, '(all)' as pool, '(all)' as tier, '(all)' as team, band, age_from_s, age_to_s, at_risk, event, censored, exposure_s, exposure_gpu_s
    from in_band
    union all
    select 'pool_tier' as level, cluster, pool, tier, '(all)' as team, band, age_from_s, age_to_s, at_risk, event, censored, exposure_s, exposure_gpu_s
    from in_band
    union all
    select 'tier' as level, cluster, '(all)' as pool, tier, '(all)' as team, band, age_from_s, age_to_s, at_risk, event, censored, exposure_s, exposure_gpu_s
    from in_band
    union all
    select 'team' as level, cluster, '(all)' as pool, '(all)' as tier, team, band, age_from_s, age_to_s, at_risk, event, censored, exposure_s, exposure_gpu_s
    from in_band
),

counted as (
    select
        level,
        cluster,
        pool,
        tier,
        team,
        band,
        any_value(age_from_s) as age_from_s,
        any_value(age_to_s) as age_to_s,
        count(*) filter (where at_risk) as runs_at_risk,
        count(*) filter (where event) as preemptions,
        count(*) filter (where censored) as censored,
        sum(exposure_s) / 3600.0 as exposure_h,
        sum(exposure_gpu_s) / 3600.0 as exposure_gpu_h
    from levels
    group by level, cluster, pool, tier, team, band
),

final as (
    select
        *,
        case when exposure_h > 0 then preemptions / exposure_h end as hazard_per_h,
        -- 95% interval of a Poisson rate: log-normal with d events; none seen: 0 to 3 per exposure (rule of three)
        case
            when exposure_h > 0 and preemptions > 0 then preemptions / exposure_h * exp(-1.96 / sqrt(preemptions))
            when exposure_h > 0 then 0.0
        end as hazard_low_per_h,
        case
            when exposure_h > 0 and preemptions > 0 then preemptions / exposure_h * exp(1.96 / sqrt(preemptions))
            when exposure_h > 0 then 3.0 / exposure_h
        end as hazard_high_per_h
    from counted
)

select * from final
