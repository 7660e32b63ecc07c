-- Every run that has a jobs row, with its job's attributes; a run last seen running (no end) ends at the first preemption link of its job from its start on (before a later run of the job started), as preempted: its pod was deleted while nobody watched, and the scheduler's report is all that says when; and a KAI PodGroup evicted before any of its pods was seen has that eviction as a run of its own, start unknown.
with

runs as (
    select * from job_runs
),

jobs_ as (
    -- a job's attributes as each of its runs carries them
    select
        cluster,
        job_id,
        pool,
        coalesce(team, '(none)') as team,
        coalesce(user_name, '(none)') as user_name,
        tier,
        case tier when 'critical' then 3 when 'high' then 2 when 'normal' then 1 else 0 end as tier_rank,
        preemptible,
        gpus,
        submit_time,
        checkpoint_interval_s,
        work_s
    from jobs
),

links as (
    select * from preemption_links
),

data_end as (
    select
        cluster,
        max(greatest(coalesce(end_time, start_time), coalesce(start_time, submit_time))) as data_end
    from runs
    group by cluster
),

successor as (
    -- when the job's next run started: a link after that is the next run's
    select
        cluster,
        job_id,
        run,
        min(start_time) over (
            partition by cluster, job_id order by run
            rows between 1 following and unbounded following
        ) as next_start
    from runs
),

closed as (
    select
        r.cluster,
        r.job_id,
        r.run,
        min(l.time) as link_time
    from runs as r
    inner join successor as s on s.cluster = r.cluster and s.job_id = r.job_id and s.run = r.run
    inner join links as l
        on l.cluster = r.cluster
        and l.victim_job_id = r.job_id
        and l.time >= r.start_time
        and (s.next_start is null or l.time < s.next_start)
    where r.end_time is null and r.state = 'running'
    group by r.cluster, r.job_id, r.run
),

unseen as (
    -- A KAI PodGroup read (its jobs row) evicted before any of its pods was seen: an eviction its PodGroup bore
    -- out (a corroborated link: its kai.scheduler/last-eviction-timestamp, KAI v0.17.0 on) that no run of the job
    -- can take, for none had started by then, is a run of its own, numbered back from the first run seen (0, -1,
    -- ...). Its start is KAI's last-start-timestamp where the link carries it; without it, like a Kueue Workload
    -- first seen after its eviction, what needs the start is unknown.
    -- (a join counting the runs begun by then, not a correlated subquery: Spark runs this view too)
    select
        cluster,
        job_id,
        time,
        source,
        victim_started,
        1 - row_number() over (partition by cluster, job_id order by time desc) as run
    from (
        select l.cluster, l.victim_job_id as job_id, l.time, l.source, l.victim_started, count(r.run) as begun
        from links as l
        inner join jobs_ as j on j.cluster = l.cluster and j.job_id = l.victim_job_id
        left join runs as r
            on r.cluster = l.cluster
            and r.job_id = l.victim_job_id
            and (r.start_time is null or r.start_time <= l.time)
        where l.victim_kind = 'podgroup' and l.corroboration is not null
        group by l.cluster, l.victim_job_id, l.time, l.source, l.victim_started
    ) as evictions
    where begun = 0
),

final as (
    select
        r.cluster,
        r.job_id,
        r.run,
        coalesce(r.pool, j.pool) as pool,
        j.team,
        j.user_name,
        j.tier,
        j.tier_rank,
        j.preemptible,
        r.gpus,
        coalesce(r.submit_time, j.submit_time) as submit_time,
        j.submit_time as job_submit_time,
        r.eligible_time,
        r.start_time,
        coalesce(r.end_time, c.link_time) as end_time,
        coalesce(r.end_time, c.link_time, d.data_end) as end_or_data_end,
        case when c.link_time is not null then 'preempted' else r.state end as state,
        r.preemptor_job_id,
        r.reason,
        j.checkpoint_interval_s,
        j.work_s,
        d.data_end,
        c.link_time is not null as ended_by_link,
        r.source
    from runs as r
    inner join jobs_ as j on j.cluster = r.cluster and j.job_id = r.job_id
    inner join data_end as d on d.cluster = r.cluster
    left join closed as c on c.cluster = r.cluster and c.job_id = r.job_id and c.run = r.run
    union all
    select
        u.cluster,
        u.job_id,
        u.run,
        j.pool,
        j.team,
        j.user_name,
        j.tier,
        j.tier_rank,
        j.preemptible,
        j.gpus,
        -- unknown: NULL of the time's type in both engines
        nullif(u.time, u.time) as submit_time,
        j.submit_time as job_submit_time,
        nullif(u.time, u.time) as eligible_time,
        -- when its scheduler allocated it, where the PodGroup said so (KAI's last-start-timestamp), else unknown
        u.victim_started as start_time,
        u.time as end_time,
        u.time as end_or_data_end,
        'preempted' as state,
        -- unknown, as text in both engines: the link bound to it names the preemptor and the reason
        nullif(u.source, u.source) as preemptor_job_id,
        nullif(u.source, u.source) as reason,
        j.checkpoint_interval_s,
        j.work_s,
        d.data_end,
        true as ended_by_link,
        u.source
    from unseen as u
    inner join jobs_ as j on j.cluster = u.cluster and j.job_id = u.job_id
    -- a cluster of such evictions alone has no runs, so no data end
    left join data_end as d on d.cluster = u.cluster
)

select * from final
