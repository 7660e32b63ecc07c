-- Per job (all its runs): GPU-hours held idle in hoarding stretches, the longest stretch, and their share of all GPU-hours allocated to it (runs without idle stretches count in the allocation).
with

runs as (
    select * from stg_runs
),

idle as (
    select * from idle_hoarding_runs
),

allocated as (
    select cluster, job_id, team, user_name, tier, sum(gpus * effective_s) / 3600.0 as allocated_gpu_hours
    from runs
    group by cluster, job_id, team, user_name, tier
),

held as (
    select
        cluster, job_id, team, user_name, tier,
        sum(idle_gpu_hours) as idle_gpu_hours,
        max(longest_stretch_s) as longest_stretch_s,
        count(*) as hoarding_runs
    from idle
    group by cluster, job_id, team, user_name, tier
),

final as (
    select
        a.*,
        h.idle_gpu_hours,
        h.longest_stretch_s,
        h.hoarding_runs,
        h.idle_gpu_hours / nullif(a.allocated_gpu_hours, 0) as idle_share
    from held as h
    inner join allocated as a using (cluster, job_id, team, user_name, tier)
)

select * from final
