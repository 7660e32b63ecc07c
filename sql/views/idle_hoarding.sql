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

items as (
    -- what each run was allocated, and what each run held idle, side by side
    select
        cluster, team, user_name, job_id, tier,
        gpus * effective_s as allocated_gpu_s,
        cast(null as double) as idle_gpu_hours,
        cast(null as double) as longest_stretch_s,
        false as held
    from runs
    union all
    select cluster, team, user_name, job_id, tier, null, idle_gpu_hours, longest_stretch_s, true
    from idle
),

keyed as (
    select
        l.level, i.cluster, i.team,
        case when l.level <> 'team' then i.user_name end as user_name,
        case when l.level = 'job' then i.job_id end as job_id,
        case when l.level = 'job' then i.tier end as tier,
        i.allocated_gpu_s, i.idle_gpu_hours, i.longest_stretch_s, i.held
    from items as i
    cross join levels as l
    -- a row whose level's key is unknown is in no group of that level
    where i.team is not null
        and (l.level = 'team' or i.user_name is not null)
        and (l.level <> 'job' or (i.job_id is not null and i.tier is not null))
),

totals as (
    select
        level, cluster, team, user_name, job_id, tier,
        sum(allocated_gpu_s) / 3600.0 as allocated_gpu_hours,
        sum(idle_gpu_hours) as idle_gpu_hours,
        max(longest_stretch_s) as longest_stretch_s,
        count(case when held then 1 end) as hoarding_runs,
        count(case when not held then 1 end) as allocations
    from keyed
    group by level, cluster, team, user_name, job_id, tier
),

final as (
    select
        level, cluster, team, user_name, job_id, tier,
        allocated_gpu_hours, idle_gpu_hours, longest_stretch_s, hoarding_runs,
        idle_gpu_hours / nullif(allocated_gpu_hours, 0) as idle_share
    from totals
    -- only what held GPUs idle, and was allocated them
    where hoarding_runs > 0 and allocations > 0
)

select * from final
