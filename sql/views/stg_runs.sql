-- Every run that started, with its job's attributes and an effective interval clipped so that overlapping runs of one job (bad data) never count the same time twice.
with

started as (
    -- stg_job_runs: the job's attributes, and the end of a run whose pod went unseen
    select * from stg_job_runs
    where start_time is not null
),

requeued as (
    -- only jobs with several runs need the windows below: most jobs run once,
    -- and a window over one-run partitions costs more than this grouping
    select cluster, job_id
    from started
    group by cluster, job_id
    having count(*) > 1
),

neighbours as (
    select
        s.cluster,
        s.job_id,
        s.run,
        max(s.end_or_data_end) over (
            partition by s.cluster, s.job_id order by s.run
            rows between unbounded preceding and 1 preceding
        ) as previous_end,
        min(s.start_time) over (
            partition by s.cluster, s.job_id order by s.run
            rows between 1 following and unbounded following
        ) as next_start_time
    from started as s
    inner join requeued as q on q.cluster = s.cluster and q.job_id = s.job_id
),

clipped as (
    select s.*, n.previous_end, n.next_start_time
    from started as s
    left join neighbours as n on n.cluster = s.cluster and n.job_id = s.job_id and n.run = s.run
),

final as (
    select
        cluster,
        job_id,
        run,
        pool,
        team,
        user_name,
        tier,
        tier_rank,
        preemptible,
        gpus,
        submit_time,
        job_submit_time,
        eligible_time,
        start_time,
        end_time,
        state,
        preemptor_job_id,
        reason,
        checkpoint_interval_s,
        work_s,
        data_end,
        coalesce(previous_end > start_time, false) as overlaps_previous,
        greatest(start_time, coalesce(previous_end, start_time)) as effective_start,
        greatest(end_or_data_end, greatest(start_time, coalesce(previous_end, start_time))) as effective_end,
        greatest(
            0,
            epoch(end_or_data_end) - epoch(greatest(start_time, coalesce(previous_end, start_time)))
        ) as effective_s,
        next_start_time
    from clipped
)

select * from final
