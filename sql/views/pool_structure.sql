-- Per cluster, whether its scheduler is configured with GPU quotas and with tiered pools, read from what scheduler_quotas holds now (Slurm QOS and accounts whose GrpTRES bounds GPUs, partitions on different nodes; Kueue ClusterQueues with GPU quotas; KAI leaf queues with GPU quotas), with what was found in words; a cluster nothing was collected for has no row (unknown).
with

quotas as (
    select * from scheduler_quotas
),

latest as (
    -- the objects the scheduler still has
    select * from quotas where not removed
),

kai_leaves as (
    -- KAI places jobs in leaf queues only; a parent's quota is what its children share
    select k.*
    from latest as k
    where k.scheduler = 'kai'
        and not exists (select 1 from latest as c where c.cluster = k.cluster and c.scheduler = 'kai'
            and c.parent = k.name)
),

counts as (
    select
        l.cluster,
        string_agg(distinct l.scheduler, ', ' order by l.scheduler) as schedulers,
        count(*) filter (where l.scheduler = 'slurm' and l.kind in ('qos', 'account') and l.gpu_limit is not null)
            as slurm_limits,
        count(*) filter (where l.scheduler = 'slurm' and l.kind = 'partition') as partitions,
        count(distinct l.nodes) filter (where l.scheduler = 'slurm' and l.kind = 'partition') as node_sets,
        count(*) filter (where l.scheduler = 'kueue' and l.gpu_quota is not null) as kueue_queues,
        count(distinct l.parent) filter (where l.scheduler = 'kueue' and l.gpu_quota is not null) as cohorts,
        string_agg(l.name, ', ' order by l.name)
            filter (where l.scheduler = 'slurm' and l.kind in ('qos', 'account') and l.gpu_limit is not null)
            as limited
    from latest as l
    group by l.cluster
),

kai as (
    select cluster, count(*) as leaves, count(*) filter (where coalesce(gpu_quota, 0) > 0) as with_quota
    from kai_leaves
    group by cluster
),

final as (
    select
        c.cluster,
        c.schedulers,
        -- one ClusterQueue or one KAI queue holding everything is no quota between teams
        c.slurm_limits > 0 or c.kueue_queues >= 2 or coalesce(k.with_quota, 0) >= 2 as has_quotas,
        c.node_sets >= 2 or c.kueue_queues >= 2 or coalesce(k.leaves, 0) >= 2 as has_tiered_pools,
        concat_ws('; ',
            case when c.partitions > 0 then c.partitions || ' Slurm partition(s) on ' || c.node_sets
                || ' node set(s)' end,
            case when c.partitions > 0 or c.slurm_limits > 0 then 'GPU limits (GrpTRES): '
                || coalesce(c.limited, 'none') end,
            case when c.kueue_queues > 0 then c.kueue_queues || ' ClusterQueue(s) with a GPU quota in '
                || c.cohorts || ' cohort(s)' end,
            case when k.leaves > 0 then k.leaves || ' KAI leaf queue(s), ' || k.with_quota || ' with a GPU quota' end
        ) as detail
    from counts as c
    left join kai as k on k.cluster = c.cluster
)

select * from final
