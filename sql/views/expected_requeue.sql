-- Per cluster, victim tier, pool and GPU count (its size class: 1, 2-7, 8-31 or 32+ GPUs): the Kaplan-Meier estimate of the wait from preemption to restart of the victims preempted within requeue_window_s before the cluster's data end, victims still waiting counted as censored, with its median (95% Greenwood log-log interval), p90, longest wait seen and the victims it rests on, read from the narrowest group (tier, pool and size class; tier and size class in any pool; the next size class down in any pool; tier and pool, any size; tier) with at least requeue_min_victims victims, else the tier's; group_size_class names the size class that answered; no row without a victim of the tier.
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

sizes as (
    -- the size class of every GPU count the cluster's runs hold: large jobs wait far longer for their GPUs to
    -- come back than small ones, so a victim's estimate is read from victims of its own class
    select distinct
        cluster,
        gpus,
        case
            when gpus >= 32 then '32+'
            when gpus >= 8 then '8-31'
            when gpus >= 2 then '2-7'
            else '1'
        end as size_class,
        case when gpus >= 32 then 4 when gpus >= 8 then 3 when gpus >= 2 then 2 else 1 end as size_rank
    from runs
),

victims as (
    -- every preemption of the window, restarted or not: one still waiting at the data's end has waited at least
    -- its requeue_delay_s (to the data's end), which the estimate counts as censored, never as a restart
    select
        l.cluster,
        l.victim_tier as tier,
        l.pool,
        s.size_class,
        s.size_rank,
        l.requeue_delay_s as wait_s,
        not l.requeue_censored as restarted
    from ledger as l
    inner join data_end as d on d.cluster = l.cluster
    left join sizes as s on s.cluster = l.cluster and s.gpus = l.victim_gpus
    cross join params as p
    where epoch(l.time) > epoch(d.data_end) - p.requeue_window_s
        and l.time <= d.data_end
        and l.victim_tier is not null
        and l.requeue_delay_s is not null
),

grouped as (
    -- each victim in its four groups, narrowest first (rank 1): its tier, pool and size class; its tier and size
    -- class in any pool (a large job's wait is read from large jobs elsewhere before small ones of its pool);
    -- its tier and pool, any size; its tier
    select
        v.cluster,
        v.tier,
        g.group_rank,
        g.requeue_group,
        case when g.group_rank in (1, 3) then v.pool end as pool,
        case when g.group_rank in (1, 2) then v.size_class end as size_class,
        case when g.group_rank in (1, 2) then v.size_rank end as size_rank,
        v.wait_s,
        v.restarted
    from victims as v
    cross join (
        values (1, 'tier, pool and size'), (2, 'tier and size'), (3, 'tier and pool'), (4, 'tier')
    ) as g (group_rank, requeue_group)
),

steps as (
    -- per group and distinct wait: the victims whose wait ended then, and how many of them restarted
    select
        cluster, tier, group_rank, requeue_group, pool, size_class, size_rank, wait_s,
        cast(count(*) as double) as leaving,
        cast(count(*) filter (where restarted) as double) as restarts
    from grouped
    group by all
),

at_risk as (
    -- victims still waiting just before each wait: those whose wait is that long or longer
    select
        *,
        sum(leaving) over (
            partition by cluster, tier, group_rank, pool, size_class order by wait_s desc
            rows between unbounded preceding and current row
        ) as at_risk
    from steps
),

curve as (
    -- S(t), the share still waiting after t: the product of (1 - restarts / at risk) over the waits up to t (a sum
    -- of logs; 0 from the first wait at which every victim still at risk restarted), and Greenwood's sum of
    -- restarts / (at risk x (at risk - restarts)) for its variance
    select
        *,
        case
            when max(case when restarts = at_risk then 1 else 0 end) over w = 1 then 0.0
            else exp(sum(case when restarts < at_risk then ln(1 - restarts / at_risk) else 0 end) over w)
        end as survival,
        sum(case when restarts < at_risk then restarts / (at_risk * (at_risk - restarts)) else 0 end) over w
            as greenwood
    from at_risk
    window w as (
        partition by cluster, tier, group_rank, pool, size_class order by wait_s
        rows between unbounded preceding and current row
    )
),

bands as (
    -- the 95% pointwise interval of S(t) on the log(-log) scale (Kalbfleisch and Prentice), which stays in 0..1
    select
        *,
        case when survival > 0 and survival < 1
            then 1.959964 * sqrt(greenwood) / abs(ln(survival)) end as z_se
    from curve
),

estimates as (
    -- per group: the median and p90 are the first waits at which S(t) falls to 0.5 and 0.1 (NULL when it never
    -- does within the data); the median's interval, the first waits at which the lower and the upper band do
    select
        cluster, tier, group_rank, requeue_group, pool, size_class, size_rank,
        cast(sum(leaving) as bigint) as victims,
        cast(sum(restarts) as bigint) as restarted,
        min(wait_s) filter (where survival <= 0.5) as expected_requeue_s,
        min(wait_s) filter (where survival <= 0.1) as requeue_p90_s,
        min(wait_s) filter (where coalesce(power(survival, exp(z_se)), survival) <= 0.5) as requeue_median_low_s,
        min(wait_s) filter (where coalesce(power(survival, exp(-z_se)), survival) <= 0.5) as requeue_median_high_s,
        max(wait_s) as longest_wait_s
    from bands
    group by all
),

cells as (
    -- every tier with victims in the cluster, with every pool and GPU count of its runs: a running job's live
    -- cost and a victim of a size no recent victim had still find the group that answers for them, by a join
    -- on its GPU count
    select t.cluster, t.tier, p.pool, s.gpus, s.size_class, s.size_rank
    from (select distinct cluster, tier from victims) as t
    inner join (select distinct cluster, pool from runs) as p on p.cluster = t.cluster
    inner join sizes as s on s.cluster = t.cluster
),

candidates as (
    -- the cell's groups that hold victims, ranked: the narrowest with at least requeue_min_victims first, and
    -- when none has that many, the widest (the tier's). A size class with too few victims of the tier in any pool
    -- (the demo's 32-GPU jobs) reads the next class down before any group that mixes sizes: a small job's wait
    -- says nothing of a large one's, and the next class's is the nearest, if low, estimate.
    select
        c.cluster, c.tier, c.pool, c.gpus, c.size_class,
        case when e.group_rank = 2 and e.size_rank < c.size_rank then 'tier and a smaller size'
            else e.requeue_group end as requeue_group,
        e.size_class as group_size_class,
        e.victims, e.restarted, e.expected_requeue_s, e.requeue_p90_s, e.requeue_median_low_s,
        e.requeue_median_high_s, e.longest_wait_s,
        row_number() over (
            partition by c.cluster, c.tier, c.pool, c.gpus
            order by
                case when e.victims >= p.requeue_min_victims then e.group_rank else 9 - e.group_rank end,
                e.size_rank desc
        ) as pick
    from cells as c
    inner join estimates as e
        on e.cluster = c.cluster and e.tier = c.tier
        and (e.group_rank = 4
            or (e.group_rank in (1, 3) and e.pool is not distinct from c.pool
                and (e.group_rank = 3 or e.size_class is not distinct from c.size_class))
            or (e.group_rank = 2 and (e.size_class is not distinct from c.size_class
                or e.size_rank = c.size_rank - 1)))
    cross join params as p
),

final as (
    select
        c.cluster,
        c.pool,
        c.tier,
        c.gpus,
        c.size_class,
        c.expected_requeue_s,
        c.requeue_p90_s,
        c.requeue_median_low_s,
        c.requeue_median_high_s,
        c.longest_wait_s,
        c.victims,
        c.restarted,
        c.requeue_group,
        c.group_size_class,
        d.data_end as window_end
    from candidates as c
    inner join data_end as d on d.cluster = c.cluster
    where c.pick = 1
)

select * from final
