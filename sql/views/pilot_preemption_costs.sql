-- One row per preemption with the victim's two currencies of cost, never summed: work thrown away (lost progress plus restart warm-up, GPU-seconds) and waiting (victim GPUs times requeue delay, GPU-seconds); the one place pilot figures read them from.
with

ledger as (
    select * from preemption_ledger
),

final as (
    select
        cluster,
        pool,
        time,
        victim_job_id,
        victim_run,
        victim_tier,
        victim_gpus,
        repeat_victim,
        lost_gpu_s + warmup_gpu_s as thrown_away_gpu_s,
        requeue_gpu_s as waiting_gpu_s,
        requeue_censored
    from ledger
)

select * from final
