-- Per cluster and source of jobs, the newest instant its data cover: its newest record (a job's submission, a run's submission, eligibility, start or end) or, later, the last moment a live read of the scheduler reported up to.
-- A recorded file, an import or a simulation is as fresh as its newest record, whenever it was loaded; a live
-- read observes the scheduler up to its cursor when the cursor is a time (sacct's window end), else up to when it
-- committed the cursor (a Kubernetes resource version, a pool capacity read). A log file's position is no such
-- read: the file may be a recorded one, and its preemption links carry their own times.
with

records as (
    select cluster, source, max(greatest(submit_time, eligible_time, start_time, end_time)) as covered_until
    from job_runs
    group by all
    union all
    select cluster, source, max(submit_time) as covered_until
    from jobs
    group by all
),

reads as (
    select
        cluster,
        collector as source,
        max(coalesce(try_cast(cursor as timestamptz), updated_at)) as covered_until
    from _watermarks
    where stream <> 'log'
    group by all
),

sources as (
    select distinct cluster, source from jobs
),

final as (
    select s.cluster, s.source, max(c.covered_until) as data_end
    from sources as s
    inner join (select * from records union all select * from reads) as c
        on c.cluster = s.cluster and c.source = s.source
    group by all
)

select * from final
