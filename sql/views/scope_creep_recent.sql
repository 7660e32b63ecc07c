-- The rows of scope_creep_weekly in each cluster's last trend_weeks weeks, each with week_no, its distance in weeks from the cluster's latest week (0 for the latest, -1 the week before).
with

params as (
    select * from analytics_params
),

weekly as (
    select * from scope_creep_weekly
),

last_week as (
    select cluster, max(week) as last_week from weekly group by cluster
),

final as (
    select
        w.*,
        cast((epoch(w.week) - epoch(l.last_week)) / 604800 as integer) as week_no
    from weekly as w
    inner join last_week as l on l.cluster = w.cluster
    cross join params as p
    where w.week > l.last_week - to_days(7 * p.trend_weeks)
)

select * from final
