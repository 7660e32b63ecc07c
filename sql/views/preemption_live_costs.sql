-- One row per preemption: the victim's live cost at that moment (its run's latest live_costs row at or before the preemption; unknown when none) and whether a cheaper victim was running (another preemptible job of the same pool, in that same computation and still running at the preemption, with at least as many GPUs and a lower known cost; unknown when the victim's cost is, or when only jobs of unknown cost could have been cheaper).
with

ledger as (
    select * from preemption_ledger
),

costs as (
    select * from live_costs
),

runs as (
    select * from job_runs
),

victim_costs as (
    select
        l.cluster,
        l.victim_job_id,
        l.victim_run,
        c.computed_at,
        c.cost_gpu_s,
        c.at_risk_gpu_s,
        c.warmup_gpu_s,
        c.requeue_gpu_s,
        c.basis,
        c.unknown,
        row_number() over (partition by l.cluster, l.victim_job_id, l.victim_run order by c.computed_at desc) as latest
    from ledger as l
    inner join costs as c
        on c.cluster = l.cluster
        and c.job_id = l.victim_job_id
        and c.run = l.victim_run
        and c.computed_at <= l.time
),

at_preemption as (
    select
        l.cluster,
        l.victim_job_id,
        l.victim_run,
        l.time,
        l.pool,
        l.victim_gpus,
        v.computed_at,
        v.cost_gpu_s,
        v.at_risk_gpu_s,
        v.warmup_gpu_s,
        v.requeue_gpu_s,
        v.basis,
        v.unknown
    from ledger as l
    left join victim_costs as v
        on v.cluster = l.cluster and v.victim_job_id = l.victim_job_id and v.victim_run = l.victim_run
        and v.latest = 1
),

alternatives as (
    -- the other preemptible jobs of the victim's pool in the same computation, as large, still running then
    select
        p.cluster,
        p.victim_job_id,
        p.victim_run,
        o.job_id,
        o.team,
        o.gpus,
        o.cost_gpu_s,
        o.cost_gpu_s < p.cost_gpu_s as cheaper,
        row_number() over (
            partition by p.cluster, p.victim_job_id, p.victim_run
            order by case when o.cost_gpu_s < p.cost_gpu_s then 0 else 1 end, o.cost_gpu_s, o.job_id
        ) as cheapest
    from at_preemption as p
    inner join costs as o
        on o.cluster = p.cluster
        and o.computed_at = p.computed_at
        and o.job_id <> p.victim_job_id
        and o.pool is not distinct from p.pool
        and o.preemptible
        and o.gpus >= p.victim_gpus
    inner join runs as r
        on r.cluster = o.cluster and r.job_id = o.job_id and r.run = o.run
        and (r.end_time is null or r.end_time > p.time)
    where p.cost_gpu_s is not null
),

compared as (
    select
        cluster,
        victim_job_id,
        victim_run,
        count(*) filter (where cheaper) as cheaper_n,
        count(*) filter (where cost_gpu_s is null) as unknown_n,
        max(case when cheapest = 1 and cheaper then job_id end) as cheaper_job_id,
        max(case when cheapest = 1 and cheaper then team end) as cheaper_team,
        max(case when cheapest = 1 and cheaper then gpus end) as cheaper_gpus,
        max(case when cheapest = 1 and cheaper then cost_gpu_s end) as cheaper_cost_gpu_s
    from alternatives
    group by cluster, victim_job_id, victim_run
),

final as (
    select
        p.cluster,
        p.victim_job_id,
        p.victim_run,
        p.time,
        p.pool,
        p.computed_at as victim_cost_computed_at,
        p.cost_gpu_s as victim_cost_gpu_s,
        p.at_risk_gpu_s as victim_at_risk_gpu_s,
        p.warmup_gpu_s as victim_warmup_gpu_s,
        p.requeue_gpu_s as victim_requeue_gpu_s,
        p.basis as victim_cost_basis,
        case
            when p.computed_at is null then 'no live cost computed for this run before the preemption'
            else p.unknown
        end as victim_cost_unknown,
        case
            when p.cost_gpu_s is null then null
            when coalesce(c.cheaper_n, 0) > 0 then true
            when coalesce(c.unknown_n, 0) > 0 then null
            else false
        end as cheaper_victim_running,
        c.cheaper_job_id,
        c.cheaper_team,
        c.cheaper_gpus,
        c.cheaper_cost_gpu_s
    from at_preemption as p
    left join compared as c
        on c.cluster = p.cluster and c.victim_job_id = p.victim_job_id and c.victim_run = p.victim_run
)

select * from final
