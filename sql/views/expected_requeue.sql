-- Per cluster, pool and victim tier: the median requeue delay of the preemptions whose victim restarted within the last requeue_window_s before the cluster's data end (history_n of them), the wait a victim there can expect; no row (unknown) without such a restart.
with

params as (
    select * from analytics_params
),

ledger as (
    select * from preemption_ledger
),

runs as (
    select * from stg_runs
),

data_end as (
    select cluster, max(data_end) as data_end from runs group by cluster
),

final as (
    select
        l.cluster,
        l.pool,
        l.victim_tier as tier,
        median(l.requeue_delay_s) as expected_requeue_s,
        count(*) as history_n,
        min(d.data_end) as window_end
    from ledger as l
    inner join data_end as d on d.cluster = l.cluster
    cross join params as p
    where not l.requeue_censored
        and epoch(l.time) > epoch(d.data_end) - p.requeue_window_s
        and l.time <= d.data_end
    group by l.cluster, l.pool, l.victim_tier
)

select * from final
