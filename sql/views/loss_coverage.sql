-- Per cluster, pool or victim team (`level`) and day or ISO week (`period`) of the preemption time: the share of preemptions, and of their lost GPU-seconds, whose lost progress is measured (basis checkpoint or rollback: is_measured), beside the count of each basis and what would measure the rest.
with

ledger as (
    select * from preemption_ledger
),

sources as (
    select * from progress_sources
),

periods as (
    select 'day' as period
    union all
    select 'week'
),

cells as (
    -- each preemption once per level and period it belongs to
    select
        l.cluster,
        v.level,
        case when v.level = 'pool' then coalesce(l.pool, '(none)') end as pool,
        case when v.level = 'team' then l.victim_team end as team,
        p.period,
        date_trunc(p.period, l.time) as window_start,
        l.basis,
        l.lost_gpu_s
    from ledger as l
    cross join periods as p
    cross join (values ('cluster'), ('pool'), ('team')) as v (level)
),

counts as (
    select
        cluster,
        level,
        pool,
        team,
        period,
        window_start,
        count(*) as preemptions,
        count(case when is_measured(basis) then 1 end) as measured_preemptions,
        count(case when basis = 'checkpoint' then 1 end) as checkpoint_preemptions,
        count(case when basis = 'rollback' then 1 end) as rollback_preemptions,
        count(case when basis = 'declared' then 1 end) as declared_preemptions,
        count(case when basis = 'assumed' then 1 end) as assumed_preemptions,
        sum(lost_gpu_s) as lost_gpu_s,
        coalesce(sum(case when is_measured(basis) then lost_gpu_s end), 0) as measured_lost_gpu_s
    from cells
    group by cluster, level, pool, team, period, window_start
),

final as (
    select
        c.cluster,
        c.level,
        c.pool,
        c.team,
        c.period,
        c.window_start,
        c.preemptions,
        c.measured_preemptions,
        c.checkpoint_preemptions,
        c.rollback_preemptions,
        c.declared_preemptions,
        c.assumed_preemptions,
        c.measured_preemptions / c.preemptions as measured_share,
        c.lost_gpu_s,
        c.measured_lost_gpu_s,
        c.measured_lost_gpu_s / nullif(c.lost_gpu_s, 0) as measured_lost_share,
        case
            when c.measured_preemptions = c.preemptions then null
            when s.missing is not null then s.missing
            else 'victims that wrote no checkpoint and no progress report the collectors found: their loss is '
                || 'declared or assumed (`preemptlens collect checkpoints`: files, logs, prometheus and '
                || 'annotations streams)'
        end as missing
    from counts as c
    left join sources as s on s.cluster = c.cluster
)

select * from final
