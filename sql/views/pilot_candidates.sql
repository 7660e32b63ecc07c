-- Per pool and preemptible tier, whether it suits a preemption pilot: recoverable (checkpoint coverage of the tier's preemptible GPU-hours in the pool at least analytics.checkpoint_coverage_min), shared (at least two teams each held 10% or more of the pool's GPU-hours) and scarce in ways preemption cannot mask (at least analytics.scarce_hours_share of the pool's days with allocated minus idle-hoarded GPU-hours at analytics.scarce_allocation_share of capacity, or a median wait of its normal and low jobs before their first start of analytics.scarce_queue_wait_s or more), each null when unmeasured.
with

params as (
    select * from analytics_params
),

runs as (
    select * from stg_runs
),

waits as (
    select * from job_first_waits
),

pool_days as (
    select * from unallocated_idle
),

ckpt_jobs as (
    select distinct cluster, job_id from checkpoints where kind = 'checkpoint'
),

coverage as (
    select
        r.cluster,
        coalesce(r.pool, '(none)') as pool,
        r.tier,
        sum(r.gpus * r.effective_s) / 3600.0 as preemptible_gpu_hours,
        sum(case when c.job_id is not null or r.checkpoint_interval_s is not null then r.gpus * r.effective_s else 0 end)
            / nullif(sum(r.gpus * r.effective_s), 0) as checkpoint_coverage
    from runs as r
    left join ckpt_jobs as c on c.cluster = r.cluster and c.job_id = r.job_id
    where r.preemptible
    group by all
),

team_use as (
    select cluster, coalesce(pool, '(none)') as pool, team, sum(gpus * effective_s) as gpu_s
    from runs
    group by all
),

sharing as (
    select
        cluster,
        pool,
        count(*) as teams,
        max(gpu_s) / nullif(sum(gpu_s), 0) as largest_team_share,
        count(*) filter (where gpu_s >= 0.1 * total_gpu_s) as teams_over_tenth
    from (select *, sum(gpu_s) over (partition by cluster, pool) as total_gpu_s from team_use) as t
    group by cluster, pool
),

scarcity as (
    select
        d.cluster,
        d.pool,
        -- GPUs held idle are not scarce GPUs: unknown without GPU samples (hoarding unknown)
        avg(case when d.hoarded_gpu_hours is null then null
            when (d.allocated_gpu_hours - d.hoarded_gpu_hours) / d.capacity_gpu_hours >= p.scarce_allocation_share
            then 1.0 else 0.0 end) as scarce_days_share
    from pool_days as d
    cross join params as p
    group by d.cluster, d.pool
),

pool_waits as (
    select cluster, pool, median(wait_s) as lower_tier_wait_p50_s
    from waits
    group by cluster, pool
),

judged as (
    select
        c.cluster,
        c.pool,
        c.tier,
        c.preemptible_gpu_hours,
        c.checkpoint_coverage,
        s.teams,
        s.largest_team_share,
        k.scarce_days_share,
        w.lower_tier_wait_p50_s,
        c.checkpoint_coverage >= p.checkpoint_coverage_min as recoverable,
        s.teams_over_tenth >= 2 as shared,
        case
            when k.scarce_days_share is null and w.lower_tier_wait_p50_s is null then null
            else coalesce(k.scarce_days_share >= p.scarce_hours_share, false)
                or coalesce(w.lower_tier_wait_p50_s >= p.scarce_queue_wait_s, false)
        end as scarce
    from coverage as c
    cross join params as p
    left join sharing as s on s.cluster = c.cluster and s.pool = c.pool
    left join scarcity as k on k.cluster = c.cluster and k.pool = c.pool
    left join pool_waits as w on w.cluster = c.cluster and w.pool = c.pool
),

final as (
    select *, recoverable and shared and scarce as candidate
    from judged
)

select * from final
