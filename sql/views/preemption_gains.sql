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
        -- a number for the event: joining and partitioning on it handles
        -- integers instead of job ids
        row_number() over (order by cluster, preemptor_job_id, preemptor_run) as event_no
    from preemptions
    where preemptor_run is not null
    group by cluster, preemptor_job_id, preemptor_run
),

capacity as (
    select event_no, gpus as capacity
    from (
        select
            e.event_no,
            p.gpus,
            row_number() over (partition by e.event_no order by p.valid_from desc) as latest
        from events as e
        inner join pools_ as p
            on p.cluster = e.cluster and p.pool = e.pool and p.valid_from <= e.time
    ) as ranked
    where latest = 1
),

victim_releases as (
    -- a victim left alone would have run on for the work it still had to do
    select
        e.event_no,
        v.victim_job_id as job_id,
        v.victim_run as run,
        v.victim_gpus as gpus,
        case
            when v.work_needed_s is not null
                then epoch(e.time) + greatest(0, v.work_needed_s - v.work_done_s)
        end as release_epoch
    from events as e
    inner join preemptions as v
        on v.cluster = e.cluster and v.preemptor_job_id = e.preemptor_job_id and v.preemptor_run = e.preemptor_run
),

pool_runs as (
    -- the runs that held GPUs of a pool; every other running job releases
    -- them at its observed end (for a run later preempted that is earlier
    -- than its natural end: a conservative gain)
    select cluster, pool, job_id, run, gpus, effective_start, end_time
    from runs
    where effective_s > 0 and pool is not null
),

timeline as (
    -- per pool, the runs' starts and ends and the events in time order; at
    -- one time ends come first (a run ending at an event holds nothing then)
    -- and starts last (a run starting at an event did not hold GPUs yet)
    select cluster, pool, effective_start as t, 2 as step, gpus as delta, 0 as ended, null as event_no
    from pool_runs
    union all
    select cluster, pool, end_time, 0, -gpus, 1, null
    from pool_runs
    where end_time is not null
    union all
    select cluster, pool, time, 1, 0, 0, event_no
    from events
    where pool is not null
),

running as (
    -- at each event: the GPUs of every run holding GPUs of the pool, and how
    -- many of the pool's runs had ended (the rank of the first end after it)
    select event_no, held, ended
    from (
        select
            event_no,
            sum(delta) over w as held,
            sum(ended) over w as ended
        from timeline
        window w as (partition by cluster, pool order by t, step rows unbounded preceding)
    ) as swept
    where event_no is not null
),

own_runs as (
    -- the event's preemptor and victims are not among the other runs
    select e.event_no, r.job_id, r.run, r.gpus, r.effective_start, r.end_time
    from events as e
    inner join (
        select event_no, job_id, run from victim_releases
        union
        select event_no, preemptor_job_id, preemptor_run from events
    ) as k on k.event_no = e.event_no
    inner join pool_runs as r
        on r.cluster = e.cluster and r.pool = e.pool and r.job_id = k.job_id and r.run = k.run
),

own_running as (
    select o.event_no, sum(o.gpus) as gpus
    from own_runs as o
    inner join events as e on e.event_no = o.event_no
    where o.effective_start < e.time and (o.end_time is null or o.end_time > e.time)
    group by o.event_no
),

held as (
    select
        e.event_no,
        e.need_gpus,
        v.gpus + coalesce(r.held, 0) - coalesce(o.gpus, 0) as allocated,
        coalesce(r.ended, 0) as ended
    from events as e
    inner join (select event_no, sum(gpus) as gpus from victim_releases group by event_no) as v
        on v.event_no = e.event_no
    left join running as r on r.event_no = e.event_no
    left join own_running as o on o.event_no = e.event_no
),

enough as (
    select
        h.event_no,
        h.need_gpus,
        h.ended,
        greatest(0, coalesce(c.capacity, h.allocated) - h.allocated) as free_gpus
    from held as h
    left join capacity as c on c.event_no = h.event_no
),

short as (
    -- the events that had to wait for releases
    select n.*, e.cluster, e.pool, e.time
    from enough as n
    inner join events as e on e.event_no = n.event_no
    where n.free_gpus < n.need_gpus
),

pool_ends as (
    select
        cluster,
        pool,
        job_id,
        run,
        gpus,
        effective_start,
        epoch(end_time) as release_epoch,
        -- job and run break ties, so that every use of the ranks agrees
        row_number() over (partition by cluster, pool order by end_time, job_id, run) - 1 as end_rank
    from pool_runs
    where end_time is not null
),

-- The releases are searched in two passes. First each short event looks at
-- the next 64 ends of its pool (those of runs that started after it are
-- skipped): a release time found there before the 65th end is exact, as
-- every release until then was seen. Only the rest pair with every run of
-- the pool that ran at the event.
end_blocks as (
    -- each end under its block of 64 and the block before, so that an event
    -- finds the 64 ends from its own by one equality
    select *, floor(end_rank / 64) as block from pool_ends
    union all
    select *, floor(end_rank / 64) - 1 from pool_ends
),

next_ends as (
    select s.event_no, b.job_id, b.run, b.gpus, b.release_epoch
    from short as s
    inner join end_blocks as b
        on b.cluster = s.cluster
        and b.pool = s.pool
        and b.block = floor(s.ended / 64)
        and b.end_rank >= s.ended
        and b.end_rank < s.ended + 64
        and b.effective_start < s.time
),

horizon as (
    -- the first end the first pass did not see (none: it saw them all)
    select s.event_no, p.release_epoch as unseen_epoch
    from short as s
    inner join pool_ends as p on p.cluster = s.cluster and p.pool = s.pool and p.end_rank = s.ended + 64
),

first_pass as (
    select event_no, gpus, release_epoch from victim_releases where event_no in (select event_no from short)
    union all
    select n.event_no, n.gpus, n.release_epoch
    from next_ends as n
    left join own_runs as o on o.event_no = n.event_no and o.job_id = n.job_id and o.run = n.run
    where o.event_no is null
),

first_found as (
    select
        s.event_no,
        h.unseen_epoch,
        min(case when s.free_gpus + c.released >= s.need_gpus then c.release_epoch end) as release_epoch
    from short as s
    left join (
        select
            event_no,
            release_epoch,
            sum(gpus) over (partition by event_no order by release_epoch rows unbounded preceding) as released
        from first_pass
        where release_epoch is not null
    ) as c on c.event_no = s.event_no
    left join horizon as h on h.event_no = s.event_no
    group by s.event_no, h.unseen_epoch
),

unresolved as (
    select s.*
    from short as s
    inner join first_found as f on f.event_no = s.event_no
    where f.unseen_epoch is not null and coalesce(f.release_epoch >= f.unseen_epoch, true)
),

unresolved_span as (
    select cluster, min(time) as first_time, max(time) as last_time
    from unresolved
    group by cluster
),

run_hours as (
    -- each run once for every hour it ran within the span of those events,
    -- so that the join below pairs an event only with the runs of its hour
    -- instead of with every run of its pool
    -- (hour_series and explode: sql/functions/duckdb.sql and spark.sql; Spark
    -- explodes no SQL function's result directly, hence the list as a column first)
    select *, explode(hours) as hour
    from (
        select r.*, hour_series(greatest(r.effective_start, s.first_time), least(r.end_time, s.last_time)) as hours
        from pool_runs as r
        inner join unresolved_span as s on s.cluster = r.cluster
        where r.end_time is not null
    ) as spans
),

second_pass as (
    select event_no, gpus, release_epoch from victim_releases where event_no in (select event_no from unresolved)
    union all
    select u.event_no, r.gpus, epoch(r.end_time)
    from unresolved as u
    inner join run_hours as r
        on r.cluster = u.cluster
        and r.pool = u.pool
        and r.hour = date_trunc('hour', u.time)
        and r.effective_start < u.time
        and r.end_time > u.time
    left join own_runs as o on o.event_no = u.event_no and o.job_id = r.job_id and o.run = r.run
    where o.event_no is null
),

second_found as (
    select
        u.event_no,
        min(case when u.free_gpus + c.released >= u.need_gpus then c.release_epoch end) as release_epoch
    from unresolved as u
    inner join (
        select
            event_no,
            release_epoch,
            sum(gpus) over (partition by event_no order by release_epoch rows unbounded preceding) as released
        from second_pass
        where release_epoch is not null
    ) as c on c.event_no = u.event_no
    group by u.event_no
),

counterfactual as (
    select
        e.*,
        n.free_gpus,
        case
            when n.free_gpus >= e.need_gpus then epoch(e.time)
            when u.event_no is not null then s.release_epoch
            else f.release_epoch
        end as release_epoch
    from events as e
    inner join enough as n on n.event_no = e.event_no
    left join first_found as f on f.event_no = e.event_no
    left join unresolved as u on u.event_no = e.event_no
    left join second_found as s on s.event_no = e.event_no
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
