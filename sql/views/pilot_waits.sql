-- One row per started run of a critical or high job with its queue wait (start minus this run's submission, seconds): the observations behind a pilot's time-sensitive wait figures.
with

runs as (
    select * from stg_runs
),

final as (
    select
        cluster,
        coalesce(pool, '(none)') as pool,
        job_id,
        run,
        tier,
        submit_time,
        start_time,
        epoch(start_time) - epoch(submit_time) as wait_s
    from runs
    where tier in ('critical', 'high') and submit_time is not null
)

select * from final
