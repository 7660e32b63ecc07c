-- Per cluster, the checkpoint and progress data its jobs' lost progress, checkpoint cadence and save cost are measured from (rows of checkpoints by kind, those whose save took a known time, the streams that found them), whether any was collected at all, and what to enable where none was.
with

runs as (
    select distinct cluster from job_runs
),

rows_ as (
    select
        cluster,
        count(case when kind = 'checkpoint' then 1 end) as checkpoint_rows,
        count(case when kind in ('progress', 'restore') then 1 end) as progress_rows,
        count(case when kind = 'checkpoint' and save_s is not null then 1 end) as timed_saves,
        -- the collector stream and layout that found the rows; the loading source where no stream says
        string_agg(distinct coalesce(origin, source), ', ' order by coalesce(origin, source)) as streams
    from checkpoints
    group by cluster
),

final as (
    select
        r.cluster,
        coalesce(c.checkpoint_rows, 0) as checkpoint_rows,
        coalesce(c.progress_rows, 0) as progress_rows,
        coalesce(c.timed_saves, 0) as timed_saves,
        c.streams,
        -- a cluster whose collectors found no checkpoint and no progress report of any job is taken as not
        -- collected (a misplaced root, a disabled stream), never as a fleet that does not checkpoint
        coalesce(c.checkpoint_rows + c.progress_rows, 0) > 0 as collected,
        case when coalesce(c.checkpoint_rows + c.progress_rows, 0) = 0
            then 'no checkpoint or progress data: enable `preemptlens collect checkpoints` '
                || '(its files, logs, prometheus or annotations stream)'
        end as missing
    from runs as r
    left join rows_ as c on c.cluster = r.cluster
)

select * from final
