-- Per run: GPU-hours its allocated GPUs sat idle in stretches at least the hoarding window long, the longest such stretch, and their share of the run's allocated GPU-hours.
with

runs as (
    select * from stg_runs
),

stretches as (
    select * from hoarding_stretches
),

per_run as (
    select
        cluster,
        job_id,
        run,
        sum(idle_s) as idle_gpu_s,
        max(idle_s) as longest_stretch_s,
        count(*) as stretches,
        count(distinct host || '/' || gpu_uuid || '/' || gpu_instance) as idle_gpus
    from stretches
    group by cluster, job_id, run
),

final as (
    select
        r.cluster,
        r.pool,
        r.job_id,
        r.run,
        r.team,
        r.user_name,
        r.tier,
        r.gpus,
        r.effective_start as start_time,
        r.effective_end as end_time,
        r.gpus * r.effective_s / 3600.0 as allocated_gpu_hours,
        p.idle_gpu_s / 3600.0 as idle_gpu_hours,
        p.longest_stretch_s,
        p.stretches,
        p.idle_gpus,
        p.idle_gpu_s / nullif(r.gpus * r.effective_s, 0) as idle_share
    from per_run as p
    inner join runs as r on r.cluster = p.cluster and r.job_id = p.job_id and r.run = p.run
)

select * from final
