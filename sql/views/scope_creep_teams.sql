-- Per pool and team over the last trend_weeks weeks: the weekly slope of the team's critical-plus-high GPU-hours as a share of the pool's GPU-hours, which sums over teams to the pool's slope, so the teams with the largest slopes drive the growth.
with

recent as (
    select * from scope_creep_recent
),

pool_week as (
    select cluster, pool, week, week_no, sum(gpu_hours) as pool_gpu_hours
    from recent
    group by cluster, pool, week, week_no
),

teams as (
    select distinct cluster, pool, team from recent
),

grid as (
    -- every team in every week of its pool, so that slopes add up across teams
    select t.cluster, t.pool, t.team, w.week, w.week_no, w.pool_gpu_hours
    from teams as t
    inner join pool_week as w on w.cluster = t.cluster and w.pool = t.pool
),

team_week as (
    select
        g.cluster,
        g.pool,
        g.team,
        g.week_no,
        coalesce(sum(case when r.tier in ('critical', 'high') then r.gpu_hours end), 0)
            / nullif(g.pool_gpu_hours, 0) as high_share_of_pool
    from grid as g
    left join recent as r
        on r.cluster = g.cluster and r.pool = g.pool and r.team = g.team and r.week = g.week
    group by g.cluster, g.pool, g.team, g.week_no, g.pool_gpu_hours
),

slopes as (
    select
        cluster,
        pool,
        team,
        case when count(*) >= 2 then regr_slope(high_share_of_pool, week_no) end as high_share_slope,
        arg_max(high_share_of_pool, week_no) as high_share_last
    from team_week
    group by cluster, pool, team
),

final as (
    select
        s.*,
        s.high_share_slope / nullif(sum(s.high_share_slope) over (partition by s.cluster, s.pool), 0)
            as share_of_pool_growth,
        rank() over (partition by s.cluster, s.pool order by s.high_share_slope desc) as growth_rank
    from slopes as s
)

select * from final
