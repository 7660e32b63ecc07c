-- Per cluster and readiness measure, a bootstrap percentile interval over UTC days (analytics.readiness_confidence, from analytics.readiness_bootstrap_samples replicates that weigh each day of readiness_days by a Poisson(1) draw), so that a measure whose interval holds its threshold reads borderline.
with

params as (
    select * from analytics_params
),

days as (
    select * from readiness_days
),

replicates as (
    select unnest(range(1, p.readiness_bootstrap_samples + 1)) as r
    from params as p
),

weights as (
    -- Days, not jobs or hours: what happens within a day hangs together (one congested afternoon makes many
    -- waits and busy hours at once). The draw comes from a hash of the cluster, day and replicate, so the same
    -- data always gives the same interval.
    select
        cluster,
        day,
        r,
        case
            when u < 0.36787944 then 0
            when u < 0.73575888 then 1
            when u < 0.91969860 then 2
            when u < 0.98101184 then 3
            when u < 0.99634015 then 4
            when u < 0.99940582 then 5
            else 6
        end as w
    from (
        select d.cluster, d.day, x.r, (hash(d.cluster, epoch(d.day), x.r) % 1000000007) / 1000000007.0 as u
        from (select distinct cluster, day from days) as d
        cross join replicates as x
    )
),

ratio_reps as (
    select d.cluster, d.measure, w.r, sum(w.w * d.num) / nullif(sum(w.w * d.den), 0) as v
    from days as d
    inner join weights as w on w.cluster = d.cluster and w.day = d.day
    where d.kind = 'ratio'
    group by all
),

week_shares as (
    select d.cluster, d.measure, w.r, d.week, sum(w.w * d.num) / nullif(sum(w.w * d.den), 0) as share
    from days as d
    inner join weights as w on w.cluster = d.cluster and w.day = d.day
    where d.kind = 'slope'
    group by all
),

slope_reps as (
    select s.cluster, s.measure, s.r, abs(regr_slope(s.share, epoch(s.week) / 604800.0)) as v
    from week_shares as s
    cross join params as p
    group by s.cluster, s.measure, s.r, p.trend_min_weeks
    having count(s.share) >= p.trend_min_weeks
),

reps as (
    select * from ratio_reps
    union all
    select * from slope_reps
),

sorted_reps as (
    select r.cluster, r.measure, list_sort(list(r.v) filter (where r.v is not null)) as v,
        (1 - p.readiness_confidence) / 2 as alpha, p.readiness_bootstrap_samples as samples
    from reps as r
    cross join params as p
    group by r.cluster, r.measure, p.readiness_confidence, p.readiness_bootstrap_samples
),

positions as (
    -- quantiles interpolated between the closest ranks, as quantile_cont does (whose level must be a constant)
    select
        cluster, measure, v, samples, len(v) as n,
        alpha * (len(v) - 1) as low_at,
        (1 - alpha) * (len(v) - 1) as high_at
    from sorted_reps
),

final as (
    select
        cluster,
        measure,
        -- a replicate that drew no day with data has no value: too many such and there is no interval
        case when n >= 0.9 * samples then v[floor(low_at)::bigint + 1]
            + (v[least(n, floor(low_at)::bigint + 2)] - v[floor(low_at)::bigint + 1]) * (low_at - floor(low_at))
        end as low,
        case when n >= 0.9 * samples then v[floor(high_at)::bigint + 1]
            + (v[least(n, floor(high_at)::bigint + 2)] - v[floor(high_at)::bigint + 1]) * (high_at - floor(high_at))
        end as high,
        n as replicates
    from positions
)

select * from final
