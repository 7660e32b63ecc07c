-- One row per preemption: victim and preemptor (where known), pool, time, GPUs and tiers, lost GPU-seconds with their basis, requeue delay (censored when no restart), warm-up, the work thrown away (lost + warm-up GPU-seconds) apart from the waiting (victim GPUs x requeue delay), recovery, history, its share of the preemptor's gain, and whether idle hoarded GPUs could have served the preemptor instead.
with

params as (
    select * from analytics_params
),

preemptions as (
    select * from stg_preemptions
),

gains as (
    select * from preemption_gains
),

idle as (
    select * from hoarding_stretches
),

sampled as (
    -- idle GPUs are known only where GPU samples were collected: elsewhere avoidable is unknown
    select cluster from gpu_samples group by cluster
),

preemption_span as (
    select cluster, min(time) as first_time, max(time) as last_time
    from preemptions
    group by cluster
),

idle_hours as (
    -- each stretch once for every hour it covers within the preemptions'
    -- span, so that the join below pairs a preemption only with the
    -- stretches of its hour instead of with every stretch of its pool
    -- (hour_series and explode: sql/functions/duckdb.sql and spark.sql; Spark
    -- explodes no SQL function's result directly, hence the list as a column first)
    select *, explode(hours) as hour
    from (
        select i.*, hour_series(greatest(i.start_time, s.first_time), least(i.end_time, s.last_time)) as hours
        from idle as i
        inner join preemption_span as s on s.cluster = i.cluster
    ) as spans
),

idle_at_preemption as (
    select
        p.cluster,
        p.victim_job_id,
        p.victim_run,
        count(distinct i.host || '/' || i.gpu_uuid || '/' || i.gpu_instance) as idle_gpus
    from preemptions as p
    cross join params as prm
    inner join idle_hours as i
        on i.cluster = p.cluster
        and i.pool = coalesce(p.preemptor_pool, p.pool)
        and i.hour = date_trunc('hour', p.time)
        and epoch(i.start_time) <= epoch(p.time) - prm.hoarding_window_s
        and i.end_time > p.time
    group by p.cluster, p.victim_job_id, p.victim_run
),

final as (
    select
        p.cluster,
        p.victim_job_id,
        p.victim_run,
        p.preemptor_job_id,
        p.preemptor_run,
        p.preemptor_job_id is not null as preemptor_known,
        p.reason,
        p.pool,
        p.time,
        p.victim_gpus,
        p.victim_tier,
        p.victim_team,
        p.victim_user,
        p.preemptor_gpus,
        p.preemptor_tier,
        p.preemptor_team,
        p.preemptor_start,
        p.run_start,
        p.run_age_s,
        p.run_age_s < prm.early_victim_s as early_victim,
        p.last_checkpoint_time,
        p.basis,
        p.progress_source,
        p.lost_s,
        p.lost_gpu_s,
        p.restart_run,
        p.restart_time,
        p.requeue_delay_s,
        p.requeue_censored,
        p.victim_gpus * p.requeue_delay_s as requeue_gpu_s,
        p.warmup_s,
        p.victim_gpus * coalesce(p.warmup_s, 0) as warmup_gpu_s,
        -- the two currencies of cost, never summed: work thrown away (compute paid for twice) here,
        -- waiting (victim GPUs x requeue delay, time-to-result) in requeue_gpu_s
        p.lost_gpu_s + p.victim_gpus * coalesce(p.warmup_s, 0) as wasted_gpu_s,
        p.recovery_s,
        p.work_done_s,
        p.work_needed_s,
        -- least() skips a NULL: an unknown share must stay unknown, not read as all done
        case when p.work_done_s / nullif(p.work_needed_s, 0) is not null
            then least(1.0, p.work_done_s / p.work_needed_s) end as work_done_share,
        coalesce(p.work_done_s / nullif(p.work_needed_s, 0) >= prm.near_completion_share, false) as near_completion,
        p.prior_job_preemptions,
        p.prior_team_preemptions,
        p.prior_job_preemptions > 0 as repeat_victim,
        g.gain_gpu_s * p.victim_gpus / g.victim_gpus as gain_gpu_s,
        g.gain_censored,
        g.counterfactual_start,
        case when s.cluster is not null then coalesce(i.idle_gpus, 0) end as idle_gpus_in_pool,
        case when s.cluster is not null then coalesce(i.idle_gpus, 0) >= coalesce(p.preemptor_gpus, p.victim_gpus) end
            as avoidable,
        p.overlaps_previous as overlapping_run
    from preemptions as p
    cross join params as prm
    left join gains as g
        on g.cluster = p.cluster and g.preemptor_job_id = p.preemptor_job_id and g.preemptor_run = p.preemptor_run
    left join idle_at_preemption as i
        on i.cluster = p.cluster and i.victim_job_id = p.victim_job_id and i.victim_run = p.victim_run
    left join sampled as s on s.cluster = p.cluster
)

select * from final
