-- Each idle stretch of an allocated GPU clipped to the run that held it, kept when it still lasts at least the hoarding window: the unit of idle hoarding.
with

params as (
    select * from analytics_params
),

stretches as (
    select * from gpu_idle_stretches
),

runs as (
    select * from stg_runs
),

clipped as (
    select
        s.cluster,
        r.pool,
        s.job_id,
        r.run,
        r.team,
        r.user_name,
        r.tier,
        s.host,
        s.gpu_uuid,
        s.gpu_instance,
        greatest(s.start_time, r.effective_start) as start_time,
        least(s.end_time, r.effective_end) as end_time
    from stretches as s
    inner join runs as r
        on r.cluster = s.cluster
        and r.job_id = s.job_id
        and s.start_time < r.effective_end
        and s.end_time > r.effective_start
),

final as (
    select
        c.*,
        epoch(c.end_time) - epoch(c.start_time) as idle_s
    from clipped as c
    cross join params as p
    where epoch(c.end_time) - epoch(c.start_time) >= p.hoarding_window_s
)

select * from final
