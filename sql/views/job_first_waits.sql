-- One row per job of the lower tiers (normal, low) with its pool and its wait from submission to its first start; a job that never started waited at least until the data's end (a lower bound).
with

runs as (
    select * from stg_runs
),

span as (
    select cluster, max(data_end) as data_end
    from runs
    group by cluster
),

final as (
    select
        j.cluster,
        j.job_id,
        coalesce(j.pool, '(none)') as pool,
        j.tier,
        greatest(0, epoch(coalesce(min(r.start_time), max(d.data_end))) - epoch(j.submit_time)) as wait_s
    from jobs as j
    inner join span as d on d.cluster = j.cluster
    left join job_runs as r on r.cluster = j.cluster and r.job_id = j.job_id and r.start_time is not null
    where j.tier in ('normal', 'low') and j.submit_time is not null
    group by j.cluster, j.job_id, j.pool, j.tier, j.submit_time
)

select * from final
