-- Per cluster, pool or team (`level`) and day or ISO week (`period`): the GPU-seconds allocated to runs, the badput split into work lost to preemption, warm-up after restarts, checkpoint saves, idle hoarding and failed runs (the last split by the run's cause of end in run_ends: crash, node failure, time limit, hang; each from measured sources only, null where a source is lacking, with the count of what could not be measured), and the goodput, the allocated GPU-seconds that advanced a job (null while any badput part is unknown; then bounded: at most allocated less the badput measured, at least that less the most the unknown parts can be).
with

runs as (
    select * from stg_runs
),

ledger as (
    select * from preemption_ledger
),

sources as (
    select * from progress_sources
),

stretches as (
    select * from hoarding_stretches
),

ckpts as (
    select * from checkpoints where kind = 'checkpoint'
),

ends as (
    select cluster, job_id, run, cause from run_ends
),

sampled as (
    -- idle hoarding is known only where GPU samples were collected (read from the samples themselves: the lake and
    -- Spark have no analyze's bookkeeping tables)
    select cluster from gpu_samples group by cluster
),

restarts as (
    -- a restart after a preemption warms up for its measured warm-up (unknown where it is not measured), from
    -- the start of the run the victim restarted in: restart_warmup_s, also where the ledger charges it to the
    -- restart's own loss (its warmup_s 0 then), since the preemption piece below starts after the warm-up
    select
        p.cluster,
        p.victim_job_id as job_id,
        p.restart_run as run,
        -- a restart preempted within its warm-up has none measured: all of it is in its own loss (warmup_s 0)
        coalesce(p.restart_warmup_s, p.warmup_s) as warmup_s
    from stg_preemptions as p
    where p.restart_run is not null
),

failed_before as (
    -- a run that follows a failed one also warms up, and no source measures that warm-up yet
    select r.cluster, r.job_id, r.run
    from runs as r
    inner join job_runs as f
        on f.cluster = r.cluster and f.job_id = r.job_id and f.run < r.run
        and f.state in ('failed', 'node_fail', 'timeout')
    left join restarts as w on w.cluster = r.cluster and w.job_id = r.job_id and w.run = r.run
    where w.run is null
    group by r.cluster, r.job_id, r.run
),

work_start as (
    -- where a run's work begins: after its warm-up when it is a restart; every badput piece of the run other
    -- than its warm-up starts no earlier, so warm-up is never counted twice. Where the warm-up is not measured,
    -- neither is where the run's work began, so what the run lost is unknown too.
    select
        r.cluster,
        r.job_id,
        r.run,
        r.effective_start + to_seconds(coalesce(w.warmup_s, 0)) as work_start,
        (w.run is null or w.warmup_s is not null) and f.run is null as warmup_known
    from runs as r
    left join restarts as w on w.cluster = r.cluster and w.job_id = r.job_id and w.run = r.run
    left join failed_before as f on f.cluster = r.cluster and f.job_id = r.job_id and f.run = r.run
),

job_ckpts as (
    select distinct cluster, job_id from ckpts
),

last_ckpt as (
    -- the last checkpoint that saved a run by its end (saves_run, as the ledger's)
    select r.cluster, r.job_id, r.run, max(c.time) as last_checkpoint_time
    from runs as r
    inner join ckpts as c
        on c.cluster = r.cluster and c.job_id = r.job_id
        and saves_run(c.run, c.time, r.run, r.start_time, r.effective_end)
    group by r.cluster, r.job_id, r.run
),

pieces as (
    -- every stretch of a run's GPUs that did not advance its job, one kind each, or (known false) a part
    -- whose length no source measured, placed at the time it happened
    select
        r.cluster, r.job_id, r.run, 'warmup' as kind, r.effective_start as piece_start,
        r.effective_start + to_seconds(coalesce(w.warmup_s, 0)) as piece_end,
        w.warmup_s is not null as known, r.effective_start as at
    from restarts as w
    inner join runs as r on r.cluster = w.cluster and r.job_id = w.job_id and r.run = w.run
    union all
    select r.cluster, r.job_id, r.run, 'warmup', r.effective_start, r.effective_start, false, r.effective_start
    from failed_before as f
    inner join runs as r on r.cluster = f.cluster and r.job_id = f.job_id and r.run = f.run
    union all
    select
        l.cluster, l.victim_job_id, l.victim_run, 'preemption', l.time - to_seconds(l.lost_s), l.time,
        is_measured(l.basis), l.time
    from ledger as l
    union all
    -- a failed run loses what it did since its last checkpoint, measured when its job writes checkpoints
    select
        r.cluster, r.job_id, r.run, 'failure', coalesce(c.last_checkpoint_time, r.start_time), r.end_time,
        is_measured(progress_basis(j.job_id is not null, false, r.checkpoint_interval_s)), r.end_time
    from runs as r
    left join job_ckpts as j on j.cluster = r.cluster and j.job_id = r.job_id
    left join last_ckpt as c on c.cluster = r.cluster and c.job_id = r.job_id and c.run = r.run
    where r.state in ('failed', 'node_fail', 'timeout') and r.end_time is not null
    union all
    select
        r.cluster, r.job_id, r.run, 'save', c.time - to_seconds(coalesce(c.save_s, 0)), c.time,
        c.save_s is not null, c.time
    from runs as r
    inner join ckpts as c
        on c.cluster = r.cluster and c.job_id = r.job_id
        and saves_run(c.run, c.time, r.run, r.start_time, r.effective_end)
),

clipped as (
    -- within the run's effective interval, and other than the warm-up after the work starts
    select
        p.cluster,
        p.job_id,
        p.run,
        r.pool,
        r.team,
        r.gpus,
        p.kind,
        p.known and (p.kind not in ('preemption', 'failure') or s.warmup_known) as known,
        p.at,
        case when p.kind = 'warmup' then r.effective_start else greatest(p.piece_start, s.work_start, r.effective_start)
            end as piece_start,
        least(p.piece_end, r.effective_end) as piece_end,
        -- the most a part no source measured can be: a warm-up, the whole run; a loss or a save, all the work
        -- from where the run's work began to the preemption, failure or checkpoint
        case when p.kind = 'warmup' then r.effective_start else s.work_start end as most_start,
        case when p.kind = 'warmup' then r.effective_end else least(p.piece_end, r.effective_end) end as most_end
    from pieces as p
    inner join runs as r on r.cluster = p.cluster and r.job_id = p.job_id and r.run = p.run
    inner join work_start as s on s.cluster = p.cluster and s.job_id = p.job_id and s.run = p.run
),

unknowns as (
    -- what no source measured, counted in the day it happened
    select c.cluster, c.pool, c.team, c.kind, date_trunc('day', c.at) as window_start
    from clipped as c
    where not c.known
),

unknown_spans as (
    -- per run, the span its unknown parts can fill at most (one span, so that two of them are not counted twice)
    select cluster, job_id, run, pool, team, gpus, min(most_start) as span_start, max(most_end) as span_end
    from clipped
    where not known
    group by all
),

spans as (
    -- what goodput counts by day, each a span held by some GPUs: the measured pieces, the idle stretches (one GPU
    -- each), the runs' allocation, and per run the span its unknown parts can fill at most
    select cluster, job_id, run, pool, team, gpus, kind, piece_start as span_start, piece_end as span_end
    from clipped
    where known
    union all
    select cluster, job_id, run, pool, team, 1, 'idle', start_time, end_time from stretches
    union all
    select cluster, job_id, run, pool, team, gpus, 'allocated', effective_start, effective_end from runs
    union all
    select cluster, job_id, run, pool, team, gpus, 'unknown', span_start, span_end from unknown_spans
),

day_spans as (
    -- each span cut at the day boundaries it crosses (a week is its seven days)
    select
        s.cluster, s.job_id, s.run, s.pool, s.team, s.gpus, s.kind,
        greatest(s.span_start, b.window_start) as seg_start,
        least(s.span_end, b.window_start + interval 1 day) as seg_end,
        b.window_start
    from (select * from spans where span_end > span_start) as s
    cross join lateral (
        select unnest(generate_series(date_trunc('day', s.span_start), s.span_end, interval 1 day)) as window_start
    ) as b
    where b.window_start < s.span_end
),

segments as (
    -- each measured piece's days
    select * from day_spans where kind not in ('idle', 'allocated', 'unknown')
),

idle_in_segments as (
    -- idle-hoarded GPU-seconds inside a piece: idle first (the GPUs did nothing), so not counted twice
    select
        s.cluster, s.job_id, s.run, s.kind, s.window_start, s.seg_start,
        sum(greatest(0, epoch(least(s.seg_end, i.end_time)) - epoch(greatest(s.seg_start, i.start_time))))
            as idle_gpu_s
    from segments as s
    inner join stretches as i
        on i.cluster = s.cluster and i.job_id = s.job_id and i.run = s.run
        and i.start_time < s.seg_end and i.end_time > s.seg_start
    group by all
),

badput as (
    select
        s.cluster, s.job_id, s.run, s.pool, s.team, s.kind, s.window_start,
        s.gpus * (epoch(s.seg_end) - epoch(s.seg_start)) - coalesce(i.idle_gpu_s, 0) as gpu_s,
        -- a failed run's cause of end (a failed or timed-out run silent long before its end is a hang)
        case when s.kind = 'failure' then e.cause end as cause
    from segments as s
    left join idle_in_segments as i
        on i.cluster = s.cluster and i.job_id = s.job_id and i.run = s.run and i.kind = s.kind
        and i.window_start = s.window_start and i.seg_start = s.seg_start
    left join ends as e on e.cluster = s.cluster and e.job_id = s.job_id and e.run = s.run
),

idle_segments as (
    select cluster, job_id, run, pool, team, kind, window_start, epoch(seg_end) - epoch(seg_start) as gpu_s
    from day_spans
    where kind = 'idle'
),

allocated as (
    select cluster, job_id, run, pool, team, kind, window_start, gpus * (epoch(seg_end) - epoch(seg_start)) as gpu_s
    from day_spans
    where kind = 'allocated'
),

unknown_days as (
    select cluster, job_id, run, pool, team, window_start, gpus * (epoch(seg_end) - epoch(seg_start)) as gpu_s
    from day_spans
    where kind = 'unknown'
),

run_days as (
    -- per run and day: its allocated GPU-seconds, and the badput measured in them
    select
        cluster, job_id, run, window_start,
        sum(case when kind = 'allocated' then gpu_s else 0 end) as allocated_gpu_s,
        sum(case when kind = 'allocated' then 0 else gpu_s end) as measured_gpu_s
    from (
        select cluster, job_id, run, kind, window_start, gpu_s from allocated
        union all
        select cluster, job_id, run, kind, window_start, gpu_s from badput
        union all
        select cluster, job_id, run, kind, window_start, gpu_s from idle_segments
    ) as a
    group by all
),

unknown_most as (
    -- the most a run's unknown parts add in a day: their span, and never more than what of the run's allocation
    -- in the day is not measured badput already
    select
        u.cluster, u.pool, u.team, 'unknown_most' as kind, u.window_start,
        least(sum(u.gpu_s), greatest(0, max(d.allocated_gpu_s) - coalesce(max(d.measured_gpu_s), 0))) as gpu_s
    from unknown_days as u
    left join run_days as d
        on d.cluster = u.cluster and d.job_id = u.job_id and d.run = u.run and d.window_start = u.window_start
    group by u.cluster, u.job_id, u.run, u.pool, u.team, u.window_start
),

items as (
    select cluster, pool, team, kind, window_start, gpu_s, 0 as unknown, cause from badput
    union all
    select cluster, pool, team, kind, window_start, gpu_s, 0, null from idle_segments
    union all
    select cluster, pool, team, kind, window_start, gpu_s, 0, null from allocated
    union all
    select cluster, pool, team, kind, window_start, 0.0, 1, null from unknowns
    union all
    select cluster, pool, team, kind, window_start, gpu_s, 0, null from unknown_most
),

days as (
    -- each pool's team's sums per day
    select
        cluster,
        coalesce(pool, '(none)') as pool,
        team,
        window_start,
        sum(case when kind = 'allocated' then gpu_s else 0 end) as allocated_gpu_s,
        sum(case when kind = 'preemption' then gpu_s else 0 end) as preemption_gpu_s,
        sum(case when kind = 'warmup' then gpu_s else 0 end) as warmup_gpu_s,
        sum(case when kind = 'save' then gpu_s else 0 end) as save_gpu_s,
        sum(case when kind = 'idle' then gpu_s else 0 end) as idle_gpu_s,
        sum(case when kind = 'failure' then gpu_s else 0 end) as failure_gpu_s,
        sum(case when kind = 'unknown_most' then gpu_s else 0 end) as unknown_most_gpu_s,
        sum(case when kind = 'failure' and cause = 'crash' then gpu_s else 0 end) as failure_crash_gpu_s,
        sum(case when kind = 'failure' and cause = 'node_failure' then gpu_s else 0 end) as failure_node_failure_gpu_s,
        sum(case when kind = 'failure' and cause = 'time_limit' then gpu_s else 0 end) as failure_time_limit_gpu_s,
        sum(case when kind = 'failure' and cause = 'hang' then gpu_s else 0 end) as failure_hang_gpu_s,
        sum(case when kind = 'preemption' then unknown else 0 end) as unmeasured_preemptions,
        sum(case when kind = 'warmup' then unknown else 0 end) as unmeasured_warmups,
        sum(case when kind = 'save' then unknown else 0 end) as untimed_saves,
        sum(case when kind = 'failure' then unknown else 0 end) as unmeasured_failures
    from items
    group by all
),

pool_teams as (
    -- the days, and the ISO weeks they add up to; then added up for the pool and the cluster
    select 'day' as period, * from days
    union all
    select
        'week',
        cluster,
        pool,
        team,
        date_trunc('week', window_start),
        sum(allocated_gpu_s),
        sum(preemption_gpu_s),
        sum(warmup_gpu_s),
        sum(save_gpu_s),
        sum(idle_gpu_s),
        sum(failure_gpu_s),
        sum(unknown_most_gpu_s),
        sum(failure_crash_gpu_s),
        sum(failure_node_failure_gpu_s),
        sum(failure_time_limit_gpu_s),
        sum(failure_hang_gpu_s),
        sum(unmeasured_preemptions),
        sum(unmeasured_warmups),
        sum(untimed_saves),
        sum(unmeasured_failures)
    from days
    group by all
),

cells as (
    select
        t.cluster,
        v.level,
        case when v.level = 'pool' then t.pool end as pool,
        case when v.level = 'team' then t.team end as team,
        t.period,
        t.window_start,
        sum(t.allocated_gpu_s) as allocated_gpu_s,
        sum(t.preemption_gpu_s) as preemption_gpu_s,
        sum(t.warmup_gpu_s) as warmup_gpu_s,
        sum(t.save_gpu_s) as save_gpu_s,
        sum(t.idle_gpu_s) as idle_gpu_s,
        sum(t.failure_gpu_s) as failure_gpu_s,
        sum(t.unknown_most_gpu_s) as unknown_most_gpu_s,
        sum(t.failure_crash_gpu_s) as failure_crash_gpu_s,
        sum(t.failure_node_failure_gpu_s) as failure_node_failure_gpu_s,
        sum(t.failure_time_limit_gpu_s) as failure_time_limit_gpu_s,
        sum(t.failure_hang_gpu_s) as failure_hang_gpu_s,
        sum(t.unmeasured_preemptions) as unmeasured_preemptions,
        sum(t.unmeasured_warmups) as unmeasured_warmups,
        sum(t.untimed_saves) as untimed_saves,
        sum(t.unmeasured_failures) as unmeasured_failures
    from pool_teams as t
    cross join (values ('cluster'), ('pool'), ('team')) as v (level)
    group by all
),

known as (
    select
        c.*,
        g.cluster is not null as has_samples,
        coalesce(s.collected, false) as collected,
        s.missing as collect_missing
    from cells as c
    left join sampled as g on g.cluster = c.cluster
    left join sources as s on s.cluster = c.cluster
),

parts as (
    select
        cluster, level, pool, team, period, window_start, allocated_gpu_s,
        case when unmeasured_preemptions = 0 then preemption_gpu_s end as badput_preemption_gpu_s,
        case when unmeasured_warmups = 0 then warmup_gpu_s end as badput_warmup_gpu_s,
        -- without any checkpoint data a run's saves are unseen, not absent
        case when untimed_saves = 0 and collected then save_gpu_s end as badput_checkpoint_save_gpu_s,
        case when has_samples then idle_gpu_s end as badput_idle_gpu_s,
        case when unmeasured_failures = 0 then failure_gpu_s end as badput_failure_gpu_s,
        -- badput_failure_gpu_s by the failed run's cause of end (run_ends): the four add up to it
        case when unmeasured_failures = 0 then failure_crash_gpu_s end as failure_crash_gpu_s,
        case when unmeasured_failures = 0 then failure_node_failure_gpu_s end as failure_node_failure_gpu_s,
        case when unmeasured_failures = 0 then failure_time_limit_gpu_s end as failure_time_limit_gpu_s,
        case when unmeasured_failures = 0 then failure_hang_gpu_s end as failure_hang_gpu_s,
        -- the badput measured so far, whatever else is unknown: the goodput is at most allocated less it
        preemption_gpu_s + warmup_gpu_s + save_gpu_s + case when has_samples then idle_gpu_s else 0 end
            + failure_gpu_s as measured_badput_gpu_s,
        -- the most the unknown parts can add to it; unbounded (NULL) while idle hoarding has no GPU samples or
        -- saves no checkpoint data, either of which may be any part of the allocation
        case when has_samples and collected then unknown_most_gpu_s end as unknown_at_most_gpu_s,
        cast(unmeasured_preemptions as bigint) as unmeasured_preemptions,
        cast(unmeasured_warmups as bigint) as unmeasured_warmups,
        cast(untimed_saves as bigint) as untimed_saves,
        cast(unmeasured_failures as bigint) as unmeasured_failures,
        -- what is missing, without counts (they are columns), so that the texts of many cells aggregate
        nullif(concat_ws('; ',
            case when unmeasured_preemptions > 0 then 'preemptions without a measured loss (basis declared or '
                || 'assumed, or after an unmeasured warm-up)' end,
            case when unmeasured_warmups > 0 then 'restarts without a measured warm-up (no progress reports after '
                || 'the restart, or it followed a failure)' end,
            case when untimed_saves > 0 then 'checkpoints without a save time (the files and logs streams time saves)'
                end,
            case when unmeasured_failures > 0 then 'failed runs without a measured loss (no checkpoint data, or after '
                || 'an unmeasured warm-up)' end,
            collect_missing,
            case when not has_samples then 'no GPU samples: idle hoarding unknown' end
        ), '') as missing
    from known
),

final as (
    select
        p.*,
        p.allocated_gpu_s - p.badput_preemption_gpu_s - p.badput_warmup_gpu_s - p.badput_checkpoint_save_gpu_s
            - p.badput_idle_gpu_s - p.badput_failure_gpu_s as goodput_gpu_s,
        (p.allocated_gpu_s - p.badput_preemption_gpu_s - p.badput_warmup_gpu_s - p.badput_checkpoint_save_gpu_s
            - p.badput_idle_gpu_s - p.badput_failure_gpu_s) / nullif(p.allocated_gpu_s, 0) as goodput_share,
        -- an upper bound while a part is unknown (an unknown part only adds badput), the goodput once all are known
        p.allocated_gpu_s - p.measured_badput_gpu_s as goodput_at_most_gpu_s,
        -- a lower bound: less the most the unknown parts can be (0 when that is unbounded); the goodput once all
        -- are known
        coalesce(greatest(0, p.allocated_gpu_s - p.measured_badput_gpu_s - p.unknown_at_most_gpu_s), 0)
            as goodput_at_least_gpu_s
    from parts as p
)

select * from final
