-- Per job (level 'job', all its runs), user (level 'user') and team (level 'team'): GPU-hours held idle in hoarding stretches, the longest stretch, and their share of all GPU-hours allocated to that job, user or team (runs without idle stretches count in the allocation).
with

runs as (
    select * from stg_runs
),

idle as (
    select * from idle_hoarding_runs
),

levels as (
    -- the finer levels name the coarser ones: a user's row its team, a job's row its user, team and tier
    select 'job' as level
    union all
    select 'user'
    union all
    select 'team'
),

allocated as (
    select
        l.level, r.cluster, r.team,
        case when l.level <> 'team' then r.user_name end as user_name,
        case when l.level = 'job' then r.job_id end as job_id,
        case when l.level = 'job' then r.tier end as tier,
        sum(r.gpus * r.effective_s) / 3600.0 as allocated_gpu_hours
    from runs as r
    cross join levels as l
    group by all
),

held as (
    select
        l.level, i.cluster, i.team,
        case when l.level <> 'team' then i.user_name end as user_name,
        case when l.level = 'job' then i.job_id end as job_id,
        case when l.level = 'job' then i.tier end as tier,
        sum(i.idle_gpu_hours) as idle_gpu_hours,
        max(i.longest_stretch_s) as longest_stretch_s,
        count(*) as hoarding_runs
    from idle as i
    cross join levels as l
    group by all
),

final as (
    select
        a.level,
        a.cluster,
        a.team,
        a.user_name,
        a.job_id,
        a.tier,
        a.allocated_gpu_hours,
        h.idle_gpu_hours,
        h.longest_stretch_s,
        h.hoarding_runs,
        h.idle_gpu_hours / nullif(a.allocated_gpu_hours, 0) as idle_share
    from held as h
    -- a key the level leaves out is NULL on both sides; a NULL key the level names matches nothing
    inner join allocated as a
        on a.level = h.level
        and a.cluster = h.cluster
        and a.team = h.team
        and (h.level = 'team' or a.user_name = h.user_name)
        and (h.level <> 'job' or (a.job_id = h.job_id and a.tier = h.tier))
)

select * from final
