-- Per pool and preemptible tier, whether it suits a preemption pilot: recoverable (checkpoint coverage of the tier's preemptible GPU-hours in the pool at least analytics.checkpoint_coverage_min), shared (at least two teams each held 10% or more of the pool's GPU-hours) and scarce: its cluster's GPUs are scarce by the one definition of scarcity, Q1 of the readiness scorecard (busy hours without preemption net of the idle-hoarded GPUs, and work waiting for them; analytics/scarcity.py), with its figure busy_hours_share; each null when unmeasured.
with

params as (
    select * from analytics_params
),

runs as (
    select * from stg_runs
),

ckpt_jobs as (
    select distinct cluster, job_id from checkpoints where kind = 'checkpoint'
),

coverage as (
    select
        r.cluster,
        coalesce(r.pool, '(none)') as pool,
        r.tier,
        sum(r.gpus * r.effective_s) / 3600.0 as preemptible_gpu_hours,
        sum(case when c.job_id is not null or r.checkpoint_interval_s is not null then r.gpus * r.effective_s else 0 end)
            / nullif(sum(r.gpus * r.effective_s), 0) as checkpoint_coverage
    from runs as r
    left join ckpt_jobs as c on c.cluster = r.cluster and c.job_id = r.job_id
    where r.preemptible
    group by all
),

team_use as (
    select cluster, coalesce(pool, '(none)') as pool, team, sum(gpus * effective_s) as gpu_s
    from runs
    group by all
),

sharing as (
    select
        cluster,
        pool,
        count(*) as teams,
        max(gpu_s) / nullif(sum(gpu_s), 0) as largest_team_share,
        count(*) filter (where gpu_s >= 0.1 * total_gpu_s) as teams_over_tenth
    from (select *, sum(gpu_s) over (partition by cluster, pool) as total_gpu_s from team_use) as t
    group by cluster, pool
),

scarcity as (
    -- one definition of scarcity: Q1's answer and its figure, the same the scorecard, the report and the CLI word
    select
        s.cluster,
        s.answer as scarce,
        e.value as busy_hours_share
    from readiness_scorecard as s
    left join readiness_evidence as e
        on e.cluster = s.cluster and e.question_no = 1 and e.measure = 'busy_hours_share'
    where s.question_no = 1
),

judged as (
    select
        c.cluster,
        c.pool,
        c.tier,
        c.preemptible_gpu_hours,
        c.checkpoint_coverage,
        s.teams,
        s.largest_team_share,
        k.busy_hours_share,
        c.checkpoint_coverage >= p.checkpoint_coverage_min as recoverable,
        s.teams_over_tenth >= 2 as shared,
        k.scarce
    from coverage as c
    cross join params as p
    left join sharing as s on s.cluster = c.cluster and s.pool = c.pool
    left join scarcity as k on k.cluster = c.cluster
),

final as (
    select *, recoverable and shared and scarce as candidate
    from judged
)

select * from final
