-- One row per preempted run (state preempted, or the one run that a preemption_links row binds to: see docs/figures.md; an Event's link its victim did not bear out binds only where the victim's runs do not gainsay it) with its preemptor coalesced from the run and its links (a link's only where plausible), its lost progress (with its basis and source), requeue delay, warm-up and history; the ledger adds gains and avoidability.
with

params as (
    select * from analytics_params
),

runs as (
    select * from stg_runs
),

all_runs as (
    -- every run, started or not (stg_job_runs)
    select * from stg_job_runs
),

raw_links as (
    select * from preemption_links
),

preemptor_fits as (
    -- A preemptor an Event names (its `related` object or its text, both the writer's word) that is a known job
    -- must have a run that could be the preempting one: every scheduler here starts the preemptor only once its
    -- victims gave their resources back, so a run started at the preemption or later (less the link
    -- tolerance), or one not started yet. A job that was already running is not believed as the preemptor.
    select
        l.cluster,
        l.victim_job_id,
        l.time,
        max(case when r.start_time is null or epoch(r.start_time) >= epoch(l.time) - p.link_tolerance_s
            then 1 else 0 end) as fits
    from raw_links as l
    cross join params as p
    inner join jobs as j on j.cluster = l.cluster and j.job_id = l.preemptor_job_id
    left join job_runs as r on r.cluster = l.cluster and r.job_id = l.preemptor_job_id
    where l.victim_kind is not null
    group by l.cluster, l.victim_job_id, l.time
),

links as (
    select
        l.*,
        coalesce(f.fits, 1) = 1 as preemptor_plausible
    from raw_links as l
    left join preemptor_fits as f on f.cluster = l.cluster and f.victim_job_id = l.victim_job_id and f.time = l.time
),

ckpts as (
    select * from checkpoints where kind = 'checkpoint'
),

progress as (
    -- step reports (kind progress: steps completed by then) and restores (kind restore: a checkpoint loaded at
    -- that step, the step a restart resumes from)
    select * from checkpoints where kind in ('progress', 'restore') and step is not null
),

job_sources as (
    select cluster, job_id, source from jobs
),

link_candidates as (
    -- Every run that may have been running when the link was written. All
    -- runs, not stg_runs: a run whose start the source lost (a Workload
    -- first seen after its eviction) still takes its own link, so that the
    -- next attempt does not.
    select
        l.cluster,
        l.victim_job_id as job_id,
        l.time as link_time,
        l.preemptor_job_id,
        l.preemptor_plausible,
        l.corroboration,
        l.reason,
        r.run,
        r.end_time,
        row_number() over (
            partition by l.cluster, l.victim_job_id, l.time
            order by
                case when r.start_time is null or r.start_time <= l.time then 0 else 1 end,
                case when r.state in ('preempted', 'requeued') then 0 else 1 end,
                abs(epoch(l.time) - epoch(r.end_time)),
                r.run
        ) as choice
    from links as l
    cross join params as p
    inner join all_runs as r
        on r.cluster = l.cluster
        and r.job_id = l.victim_job_id
        and (r.start_time is null or epoch(r.start_time) <= epoch(l.time) + p.link_tolerance_s)
        and abs(epoch(l.time) - epoch(r.end_time)) <= p.link_tolerance_s
        -- A link from an Event that its victim's state did not bear out when the collector read it back
        -- (collectors/kubernetes/corroborate.py: the victim was gone, or a KAI before v0.17.0) is its writer's
        -- word only: it binds to a run that its own state says was preempted, one last seen running (gone
        -- unseen: stg_job_runs ended it at the link), or a KAI gang its pods' deletion ended (such a KAI records
        -- an eviction nowhere else), never to a run that ended in another way its state records.
        and (l.victim_kind is null or l.corroboration is not null or r.state = 'preempted'
            or (l.victim_kind = 'podgroup' and r.state = 'cancelled'))
),

link_match as (
    -- each link binds to its first candidate; a run bound by several links
    -- (one preemption reported twice) takes the preemptor of the nearest
    select
        cluster,
        job_id,
        run,
        link_time,
        preemptor_job_id,
        preemptor_plausible,
        reason,
        -- a corroborated link, then one naming a plausible preemptor, before the nearest: a second Event
        -- written beside the scheduler's does not displace it
        row_number() over (
            partition by cluster, job_id, run
            order by
                case when corroboration is not null then 0 else 1 end,
                case when preemptor_plausible then 0 else 1 end,
                abs(epoch(link_time) - epoch(end_time)),
                link_time
        ) as nearest
    from link_candidates
    where choice = 1
),

victim_runs as (
    -- started runs (stg_runs), and runs whose start the source lost (a victim first seen after its
    -- eviction): those are preemptions too, whose figures that need the start are unknown
    select * from runs
    union all
    select
        cluster, job_id, run, pool, team, user_name, tier, tier_rank, preemptible, gpus, submit_time,
        job_submit_time, eligible_time, start_time, end_time, state, preemptor_job_id, reason,
        checkpoint_interval_s, work_s, data_end,
        false as overlaps_previous,
        -- unknown without a start; start_time (NULL here) gives the column its time type in both engines
        start_time as effective_start,
        start_time as effective_end,
        cast(null as double) as effective_s,
        start_time as next_start_time
    from all_runs
    where start_time is null
),

preempted as (
    -- Spark inlines a CTE at each reference, and with this one its links and all runs: the CTEs below take it
    -- at most once each and pass its columns on rather than join it again (43 copies in one plan had run
    -- Spark's driver out of heap)
    select
        r.*,
        -- a source that truncates the run's end to the second (sacct) was killed at its link's time when the
        -- link falls within that second (the slurmctld log keeps the millisecond): a checkpoint written between
        -- the two saved the run
        case
            when epoch(r.end_time) = floor(epoch(r.end_time))
                and epoch(lm.link_time) > epoch(r.end_time) and epoch(lm.link_time) < epoch(r.end_time) + 1
                then lm.link_time
            else r.end_time
        end as preempted_at,
        -- the run's own preemptor is what its scheduler wrote in its state; a link's only where plausible
        coalesce(r.preemptor_job_id, case when lm.preemptor_plausible then lm.preemptor_job_id end) as preemptor_id,
        -- a run the scheduler did not mark preempted (a pod deleted, a gang cancelled) is one by its link,
        -- whose reason says why; its own ("deleted") does not
        case when r.state = 'preempted' then coalesce(r.reason, lm.reason) else coalesce(lm.reason, r.reason) end
            as preempt_reason
    from victim_runs as r
    left join link_match as lm
        on lm.cluster = r.cluster and lm.job_id = r.job_id and lm.run = r.run and lm.nearest = 1
    where r.end_time is not null and (r.state = 'preempted' or lm.job_id is not null)
),

job_has_ckpts as (
    select distinct cluster, job_id from ckpts
),

last_ckpt as (
    select
        p.cluster,
        p.job_id,
        p.run,
        max(c.time) as last_checkpoint_time
    from preempted as p
    inner join ckpts as c
        on c.cluster = p.cluster
        and c.job_id = p.job_id
        and saves_run(c.run, c.time, p.run, p.start_time, p.preempted_at)
    group by p.cluster, p.job_id, p.run
),

restored_step as (
    -- the progress a restart resumes from: the job's last checkpoint before the preemption
    select cluster, job_id, run, step
    from (
        select
            p.cluster,
            p.job_id,
            p.run,
            c.step,
            row_number() over (partition by p.cluster, p.job_id, p.run order by c.time desc) as latest
        from preempted as p
        inner join ckpts as c
            on c.cluster = p.cluster and c.job_id = p.job_id and c.time <= p.preempted_at
        where c.step is not null
    ) as ranked
    where latest = 1
),

next_run as (
    select
        p.cluster,
        p.job_id,
        p.run,
        p.start_time,
        p.preempted_at,
        n.run as next_run,
        n.start_time as next_start,
        n.end_time as next_end,
        row_number() over (partition by p.cluster, p.job_id, p.run order by n.start_time, n.run) as first_later
    from preempted as p
    inner join runs as n
        on n.cluster = p.cluster and n.job_id = p.job_id and n.run > p.run
),

next_reports as (
    -- the progress reports of the run that followed a preempted one: those of its run, or, for a report that
    -- names no run, those within its span
    select
        nr.cluster,
        nr.job_id,
        nr.run,
        nr.start_time,
        nr.preempted_at,
        nr.next_start,
        g.time,
        g.kind,
        g.step,
        g.origin,
        g.source
    from next_run as nr
    inner join progress as g
        on g.cluster = nr.cluster
        and g.job_id = nr.job_id
        and (g.run = nr.next_run or (g.run is null and g.time >= nr.next_start
            and (nr.next_end is null or g.time <= nr.next_end)))
    where nr.first_later = 1
),

restart_report as (
    -- the step the next run resumed from (the goodput method), from its first report: a restore is that step
    -- itself; a step report counts the steps completed by then, so the first one after the restart's start is one
    -- step past it (resuming from step 30, the first report is 31). A report at the start's very instant (a
    -- sampled counter) has completed nothing yet and is the step itself.
    select
        cluster, job_id, run, start_time, preempted_at,
        case when kind = 'restore' or time <= next_start then step else step - 1 end as restart_step,
        stream_of(origin, source) as restart_source
    from (
        select
            *,
            row_number() over (
                partition by cluster, job_id, run
                order by time, case when kind = 'restore' then 0 else 1 end, step
            ) as nth
        from next_reports
    ) as ranked
    where nth = 1
),

run_reports as (
    -- the preempted run's own progress reports beside the step its restart resumed from, each with the report
    -- before and after it (windows, not self-joins: Spark inlines every reference to a CTE, and for the same
    -- reason the run's times come with restart_report rather than from preempted once more)
    select
        rr.cluster,
        rr.job_id,
        rr.run,
        rr.start_time,
        rr.preempted_at,
        rr.restart_step,
        g.time,
        g.step,
        lag(g.time) over (partition by rr.cluster, rr.job_id, rr.run order by g.time, g.step) as prev_time,
        lag(g.step) over (partition by rr.cluster, rr.job_id, rr.run order by g.time, g.step) as prev_step,
        lead(g.time) over (partition by rr.cluster, rr.job_id, rr.run order by g.time, g.step) as next_time,
        lead(g.step) over (partition by rr.cluster, rr.job_id, rr.run order by g.time, g.step) as next_step,
        row_number() over (partition by rr.cluster, rr.job_id, rr.run order by g.time, g.step) as k
    from restart_report as rr
    inner join progress as g
        on g.cluster = rr.cluster
        and g.job_id = rr.job_id
        and (g.run = rr.run or g.run is null)
        and g.time >= rr.start_time
        and g.time <= rr.preempted_at
),

rollback_marks as (
    -- the first report at or past the restart step, and the last report
    select
        r.*,
        min(case when step >= restart_step then k end) over (partition by cluster, job_id, run) as k_hit,
        max(k) over (partition by cluster, job_id, run) as k_last
    from run_reports as r
),

rollback_points as (
    -- when the run first reached the restart step: at the first report at or past it, interpolated from the
    -- report before it, or extrapolated back at the run's rate from the one after it (never before the run's
    -- start); a step never reached, extrapolated forward from the last two reports (never after the preemption)
    select
        cluster,
        job_id,
        run,
        max(restart_step) as restart_step,
        max(k_hit) as k_hit,
        max(case when k = k_hit then
            case
                when step = restart_step then epoch(time)
                when prev_time is not null
                    then epoch(prev_time) + (restart_step - prev_step) * (epoch(time) - epoch(prev_time)) / (step - prev_step)
                when next_step > step
                    then greatest(epoch(start_time),
                        epoch(time) - (step - restart_step) * (epoch(next_time) - epoch(time)) / (next_step - step))
                else epoch(time)
            end
        end) as hit_epoch,
        max(case when k = k_last then
            case
                when prev_step < step
                    then least(epoch(preempted_at),
                        epoch(time) + (restart_step - step) * (epoch(time) - epoch(prev_time)) / (step - prev_step))
                else epoch(time)
            end
        end) as last_epoch
    from rollback_marks
    group by cluster, job_id, run
),

rollback as (
    select
        cluster,
        job_id,
        run,
        restart_step,
        case when k_hit is not null then hit_epoch else last_epoch end as reached_epoch
    from rollback_points
),

resumed_step as (
    -- the step a restart resumes from: the last checkpoint's before the preemption, else the rollback's. From
    -- the two alone, not joined to preempted: it is only left-joined to, so a run with neither needs no row, and
    -- on Spark each reference to preempted is one more inlined copy of its plan
    select cluster, job_id, run, coalesce(max(restored), max(rolled_back)) as step
    from (
        select cluster, job_id, run, step as restored, cast(null as double) as rolled_back from restored_step
        union all
        select cluster, job_id, run, cast(null as double) as restored, restart_step as rolled_back from rollback
    ) as steps
    group by cluster, job_id, run
),

checkpoint_source as (
    -- the stream of the checkpoints the loss is measured from: the job's latest at or before the preemption
    select cluster, job_id, run, stream_of(origin, source) as checkpoint_source
    from (
        select
            p.cluster,
            p.job_id,
            p.run,
            c.origin,
            c.source,
            row_number() over (
                partition by p.cluster, p.job_id, p.run
                order by case when c.time <= p.preempted_at then 0 else 1 end, c.time desc
            ) as latest
        from preempted as p
        inner join ckpts as c on c.cluster = p.cluster and c.job_id = p.job_id
    ) as ranked
    where latest = 1
),

next_progress as (
    -- each advancing report of the next run with the one after it (a window, not a self-join, as run_reports)
    select
        g.cluster,
        g.job_id,
        g.run,
        coalesce(rs.step, 0) as resumed_from,
        g.time,
        g.step,
        lead(g.time) over (partition by g.cluster, g.job_id, g.run order by g.time) as next_time,
        lead(g.step) over (partition by g.cluster, g.job_id, g.run order by g.time) as next_step,
        row_number() over (partition by g.cluster, g.job_id, g.run order by g.time) as nth
    from next_reports as g
    left join resumed_step as rs
        on rs.cluster = g.cluster and rs.job_id = g.job_id and rs.run = g.run
    -- reports still at the restored step fall inside the warm-up and carry no rate
    where g.step > coalesce(rs.step, 0)
),

warmup as (
    -- extrapolate the first two advancing progress reports of the next run back to the restored step
    select
        cluster,
        job_id,
        run,
        epoch(time) - (step - resumed_from) * (epoch(next_time) - epoch(time)) / (next_step - step) as resumed_epoch
    from next_progress
    where nth = 1 and next_step > step
),

preemptor_run as (
    select
        p.cluster,
        p.job_id,
        p.run,
        pr.run as preemptor_run,
        pr.start_time as preemptor_start,
        pr.gpus as preemptor_gpus,
        pr.pool as preemptor_pool,
        pr.tier as preemptor_tier,
        pr.team as preemptor_team,
        row_number() over (partition by p.cluster, p.job_id, p.run order by pr.start_time, pr.run) as first_after
    from preempted as p
    cross join params as prm
    inner join runs as pr
        on pr.cluster = p.cluster
        and pr.job_id = p.preemptor_id
        and epoch(pr.start_time) >= epoch(p.preempted_at) - prm.link_tolerance_s
),

measured as (
    select
        p.*,
        lc.last_checkpoint_time,
        nr.next_run as restart_run,
        nr.next_start as restart_time,
        w.resumed_epoch,
        rb.reached_epoch,
        epoch(p.preempted_at) - epoch(p.start_time) as run_age_s,
        -- progress_basis and progress_at_risk_s (sql/functions/shared.sql): the one rule the live cost applies too
        progress_basis(jc.job_id is not null, rb.reached_epoch is not null, p.checkpoint_interval_s) as basis,
        cs.checkpoint_source,
        rr.restart_source,
        js.source as job_source
    from preempted as p
    left join job_has_ckpts as jc on jc.cluster = p.cluster and jc.job_id = p.job_id
    left join rollback as rb on rb.cluster = p.cluster and rb.job_id = p.job_id and rb.run = p.run
    left join restart_report as rr on rr.cluster = p.cluster and rr.job_id = p.job_id and rr.run = p.run
    left join checkpoint_source as cs on cs.cluster = p.cluster and cs.job_id = p.job_id and cs.run = p.run
    left join job_sources as js on js.cluster = p.cluster and js.job_id = p.job_id
    left join last_ckpt as lc on lc.cluster = p.cluster and lc.job_id = p.job_id and lc.run = p.run
    left join next_run as nr
        on nr.cluster = p.cluster and nr.job_id = p.job_id and nr.run = p.run and nr.first_later = 1
    left join warmup as w on w.cluster = p.cluster and w.job_id = p.job_id and w.run = p.run
),

costed as (
    select
        m.*,
        progress_at_risk_s(
            m.basis,
            case
                when m.basis = 'rollback' then greatest(0, epoch(m.preempted_at) - m.reached_epoch)
                else epoch(m.preempted_at) - epoch(coalesce(m.last_checkpoint_time, m.start_time))
            end,
            m.run_age_s,
            m.checkpoint_interval_s
        ) as lost_s,
        case m.basis
            when 'checkpoint' then m.checkpoint_source
            when 'rollback' then m.restart_source
            when 'declared' then m.job_source
        end as progress_source,
        m.restart_time is null as requeue_censored,
        epoch(coalesce(m.restart_time, m.data_end)) - epoch(m.preempted_at) as requeue_delay_s,
        case
            -- a restart preempted before it saved anything loses everything since its start (no checkpoint
            -- in it; by rollback, a restored step it had not got past), its warm-up with it: that row counts
            -- the warm-up, this one does not count it again. The restart is the job's next preempted run then:
            -- a window, not a self-join, which Spark would inline twice.
            when m.basis <> 'declared'
                and lead(m.run) over by_run = m.restart_run
                and lead(
                    case m.basis
                        when 'rollback' then m.reached_epoch <= epoch(m.start_time)
                        when 'declared' then false
                        else m.last_checkpoint_time is null
                    end
                ) over by_run
                then 0
            when m.basis <> 'declared' and m.resumed_epoch is not null
                then greatest(0, m.resumed_epoch - epoch(m.restart_time))
        end as warmup_s
    from measured as m
    window by_run as (partition by m.cluster, m.job_id order by m.run)
),

history as (
    select
        c.*,
        row_number() over (partition by cluster, job_id order by preempted_at, run) - 1 as prior_job_preemptions,
        rank() over (partition by cluster, team order by preempted_at) - 1 as prior_team_preemptions,
        coalesce(sum(lost_s + coalesce(warmup_s, 0)) over (
            partition by cluster, job_id order by preempted_at, run
            rows between unbounded preceding and 1 preceding
        ), 0) as earlier_waste_s,
        sum(lost_s + coalesce(warmup_s, 0)) over (partition by cluster, job_id) as all_waste_s
    from costed as c
),

job_runtime as (
    -- keyed by the preempted runs, which history has one row each of: joined from preempted, not from
    -- history, whose plan (every CTE above) Spark would otherwise inline a second time
    select
        p.cluster,
        p.job_id,
        p.run,
        sum(case when r.run <= p.run then r.effective_s else 0 end) as runtime_so_far_s,
        sum(r.effective_s) as runtime_total_s,
        max(case when r.state = 'completed' then 1 else 0 end) = 1 as job_completed
    from preempted as p
    inner join runs as r on r.cluster = p.cluster and r.job_id = p.job_id
    group by p.cluster, p.job_id, p.run
),

unknown_runtime as (
    -- the job's first ended run whose start is unknown: its run time, and so the work done from it on, is unknown
    select cluster, job_id, min(run) as first_run
    from all_runs
    where start_time is null and end_time is not null
    group by cluster, job_id
),

final as (
    select
        h.cluster,
        h.job_id as victim_job_id,
        h.run as victim_run,
        h.preemptor_id as preemptor_job_id,
        pr.preemptor_run,
        h.preempt_reason as reason,
        h.pool,
        h.preempted_at as time,
        h.gpus as victim_gpus,
        h.tier as victim_tier,
        h.team as victim_team,
        h.user_name as victim_user,
        pr.preemptor_tier,
        pr.preemptor_team,
        pr.preemptor_gpus,
        pr.preemptor_start,
        pr.preemptor_pool,
        h.start_time as run_start,
        h.run_age_s,
        h.last_checkpoint_time,
        h.basis,
        h.progress_source,
        h.lost_s,
        h.gpus * h.lost_s as lost_gpu_s,
        h.restart_run,
        h.restart_time,
        h.requeue_delay_s,
        h.requeue_censored,
        h.warmup_s,
        -- the restart's warm-up as measured, also where it is charged to the restart's own loss (warmup_s 0)
        case when h.basis <> 'declared' and h.resumed_epoch is not null
            then greatest(0, h.resumed_epoch - epoch(h.restart_time)) end as restart_warmup_s,
        h.requeue_delay_s + coalesce(h.warmup_s, 0) + h.lost_s as recovery_s,
        h.prior_job_preemptions,
        h.prior_team_preemptions,
        case when u.first_run is null or u.first_run > h.run then jr.runtime_so_far_s - h.earlier_waste_s end
            as work_done_s,
        coalesce(
            h.work_s,
            case when jr.job_completed and u.first_run is null then jr.runtime_total_s - h.all_waste_s end
        ) as work_needed_s,
        h.overlaps_previous,
        h.data_end
    from history as h
    left join job_runtime as jr on jr.cluster = h.cluster and jr.job_id = h.job_id and jr.run = h.run
    left join unknown_runtime as u on u.cluster = h.cluster and u.job_id = h.job_id
    left join preemptor_run as pr
        on pr.cluster = h.cluster and pr.job_id = h.job_id and pr.run = h.run and pr.first_after = 1
)

select * from final
