-- Rows the analytics had to correct or could not use: runs overlapping an earlier run of the same job (clipped, never double-counted) and runs whose job is missing (left out).
with

runs as (
    select * from job_runs
),

staged as (
    select * from stg_runs
),

overlapping as (
    select
        cluster,
        job_id,
        run,
        'run overlaps an earlier run of its job' as issue,
        'counted from ' || cast(effective_start as varchar) || ' instead of ' || cast(start_time as varchar)
            as handling
    from staged
    where overlaps_previous
),

orphan as (
    select
        r.cluster,
        r.job_id,
        r.run,
        'run has no row in jobs' as issue,
        'left out of every figure' as handling
    from runs as r
    where not exists (select 1 from jobs as j where j.cluster = r.cluster and j.job_id = r.job_id)
),

final as (
    select * from overlapping
    union all
    select * from orphan
)

select * from final
