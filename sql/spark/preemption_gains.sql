-- One row per preemption event (a preemptor run and the victims it displaced): how many preemptor GPU-seconds earlier it started than it could have by waiting until running jobs' own ends (plus unallocated GPUs) freed the GPUs it needed.
with

preemptions as (
    select * from stg_preemptions
),

runs as (
    select * from stg_runs
),

pools_ as (
    select * from pools
),

events as (
    select
        cluster,
        preemptor_job_id,
        preemptor_run,
        coalesce(min(preemptor_pool), min(pool)) as pool,
        min(time) as time,
        min(preemptor_start) as preemptor_start,
        min(preemptor_gpus) as need_gpus,
        min(preemptor_tier) as preemptor_tier,
        min(preemptor_team) as preemptor_team,
        sum(victim_gpus) as victim_gpus,
        count(*) as victims,
        min(data_end) as data_end,
        -- a number for the event: partitioning its releases on it sorts
        -- integers instead of job ids
        row_number() over (order by cluster, preemptor_job_id, preemptor_run) as event_no
    from preemptions
    where preemptor_run is not null
    group by cluster, preemptor_job_id, preemptor_run
),

capacity as (
    select cluster, preemptor_job_id, preemptor_run, gpus as capacity
    from (
        select
            e.cluster,
            e.preemptor_job_id,
            e.preemptor_run,
            p.gpus,
            row_number() over (
                partition by e.cluster, e.preemptor_job_id, e.preemptor_run order by p.valid_from desc
            ) as latest
        from events as e
        inner join pools_ as p
            on p.cluster = e.cluster and p.pool = e.pool and p.valid_from <= e.time
    ) as ranked
    where latest = 1
),

victim_releases as (
    -- a victim left alone would have run on for the work it still had to do
    select
        e.cluster,
        e.preemptor_job_id,
        e.preemptor_run,
        v.victim_gpus as gpus,
        case
            when v.work_needed_s is not null
                then epoch(e.time) + greatest(0, v.work_needed_s - v.work_done_s)
        end as release_epoch,
        e.event_no
    from events as e
    inner join preemptions as v
        on v.cluster = e.cluster and v.preemptor_job_id = e.preemptor_job_id and v.preemptor_run = e.preemptor_run
),

event_span as (
    select cluster, min(time) as first_time, max(time) as last_time
    from events
    group by cluster
),

run_hours as (
    -- each run once for every hour it ran within the events' span, so that
    -- the join below pairs an event only with the runs of its hour instead
    -- of with every run of its pool
    select r.*, h.hour
    from runs as r
    inner join event_span as s on s.cluster = r.cluster
    -- Spark: sequence() for generate_series(); it raises on an end before the start, where
    -- generate_series() gives no rows, so such spans run once and the where drops them
    lateral view explode(sequence(
        date_trunc('hour', greatest(r.effective_start, s.first_time)),
        greatest(
            date_trunc('hour', greatest(r.effective_start, s.first_time)),
            date_trunc('hour', least(coalesce(r.end_time, s.last_time), s.last_time))
        ),
        interval 1 hour
    )) h as hour
    where r.effective_s > 0
        and date_trunc('hour', greatest(r.effective_start, s.first_time)) <= date_trunc('hour', least(coalesce(r.end_time, s.last_time), s.last_time))
),

victims_of as (
    select e.event_no, v.victim_job_id, v.victim_run
    from events as e
    inner join preemptions as v
        on v.cluster = e.cluster and v.preemptor_job_id = e.preemptor_job_id and v.preemptor_run = e.preemptor_run
),

other_releases as (
    -- other running jobs release at their observed end (for a run later
    -- preempted that is earlier than its natural end: a conservative gain)
    select
        e.cluster,
        e.preemptor_job_id,
        e.preemptor_run,
        r.gpus,
        case when r.end_time is not null then epoch(r.end_time) end as release_epoch,
        e.event_no
    from events as e
    inner join run_hours as r
        on r.cluster = e.cluster
        and r.pool = e.pool
        and r.hour = date_trunc('hour', e.time)
        and r.effective_start < e.time
        and (r.end_time is null or r.end_time > e.time)
    left join victims_of as x
        on x.event_no = e.event_no and x.victim_job_id = r.job_id and x.victim_run = r.run
    where not (r.job_id = e.preemptor_job_id and r.run = e.preemptor_run)
        and x.event_no is null
),

releases as (
    select * from victim_releases
    union all
    select * from other_releases
),

held as (
    select event_no, sum(gpus) as allocated
    from releases
    group by event_no
),

cumulative as (
    select
        r.*,
        sum(r.gpus) over (
            partition by r.event_no
            order by r.release_epoch
            rows unbounded preceding
        ) as released
    from releases as r
    where r.release_epoch is not null
),

enough as (
    select
        e.cluster,
        e.preemptor_job_id,
        e.preemptor_run,
        greatest(0, coalesce(c.capacity, h.allocated) - h.allocated) as free_gpus
    from events as e
    inner join held as h
        on h.event_no = e.event_no
    left join capacity as c
        on c.cluster = e.cluster and c.preemptor_job_id = e.preemptor_job_id and c.preemptor_run = e.preemptor_run
),

counterfactual as (
    select
        e.*,
        n.free_gpus,
        case
            when n.free_gpus >= e.need_gpus then epoch(e.time)
            else (
                select min(c.release_epoch) from cumulative as c
                where c.event_no = e.event_no and n.free_gpus + c.released >= e.need_gpus
            )
        end as release_epoch
    from events as e
    inner join enough as n
        on n.cluster = e.cluster and n.preemptor_job_id = e.preemptor_job_id and n.preemptor_run = e.preemptor_run
),

final as (
    select
        cluster,
        preemptor_job_id,
        preemptor_run,
        pool,
        time,
        preemptor_start,
        need_gpus,
        preemptor_tier,
        preemptor_team,
        victims,
        victim_gpus,
        free_gpus,
        to_timestamp(coalesce(release_epoch, epoch(data_end))) as counterfactual_start,
        release_epoch is null as gain_censored,
        greatest(0, coalesce(release_epoch, epoch(data_end)) - epoch(preemptor_start)) as gain_s,
        need_gpus * greatest(0, coalesce(release_epoch, epoch(data_end)) - epoch(preemptor_start)) as gain_gpu_s
    from counterfactual
)

select * from final
