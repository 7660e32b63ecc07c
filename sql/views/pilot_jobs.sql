-- One row per job that started with its pool, tier, first submission, final end and completion time (first submission to final end, null while unfinished) and retries (runs after the first): the observations behind a pilot's per-job figures.
with

runs as (
    select * from stg_runs
),

per_job as (
    select
        cluster,
        job_id,
        arg_max(coalesce(pool, '(none)'), run) as pool,
        any_value(tier) as tier,
        min(job_submit_time) as submit_time,
        max(end_time) as last_end,
        count(*) as runs,
        arg_max(state, run) as final_state
    from runs
    group by cluster, job_id
),

final as (
    select
        j.cluster,
        j.job_id,
        j.pool,
        j.tier,
        j.submit_time,
        case when j.final_state in ('completed', 'failed', 'cancelled', 'timeout') then j.last_end end
            as finished_at,
        case when j.final_state in ('completed', 'failed', 'cancelled', 'timeout')
            then epoch(j.last_end) - epoch(j.submit_time) end as completion_s,
        j.runs - 1 as retries
    from per_job as j
)

select * from final
