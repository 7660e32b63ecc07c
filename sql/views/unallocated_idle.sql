-- Per pool and day: GPU-hours of capacity, allocated, unallocated (capacity nobody held: idle but free to use) and hoarded (allocated but idle; unknown for a cluster without GPU samples), kept apart because only the first is spare capacity.
with

runs as (
    select * from stg_runs
),

pools_ as (
    select * from pools
),

stretches as (
    select * from hoarding_stretches
),

sampled as (
    -- idle GPUs are known only where GPU samples were collected: elsewhere hoarding is unknown, not zero
    select cluster from gpu_samples group by cluster
),

span as (
    select cluster, min(effective_start) as data_start, max(data_end) as data_end
    from runs
    group by cluster
),

days as (
    select s.cluster, d.day, d.day + interval 1 day as day_end, s.data_start, s.data_end
    from span as s
    cross join lateral (
        select unnest(generate_series(date_trunc('day', s.data_start), s.data_end, interval 1 day)) as day
    ) as d
),

segments as (
    select
        cluster,
        pool,
        gpus,
        valid_from,
        coalesce(
            lead(valid_from) over (partition by cluster, pool order by valid_from),
            timestamptz '9999-12-31 00:00:00+00'
        ) as valid_to
    from pools_
),

capacity as (
    select
        d.cluster,
        g.pool,
        d.day,
        sum(g.gpus * greatest(0, epoch(least(g.valid_to, d.day_end, d.data_end))
            - epoch(greatest(g.valid_from, d.day, d.data_start)))) as capacity_gpu_s
    from days as d
    inner join segments as g on g.cluster = d.cluster
    group by d.cluster, g.pool, d.day
),

held as (
    -- what each day holds: GPUs allocated to runs, and GPUs hoarded (each idle stretch is one GPU's)
    select cluster, pool, effective_start as held_from, effective_end as held_to, gpus, false as idle from runs
    union all
    select cluster, pool, start_time, end_time, 1, true from stretches
),

held_daily as (
    select
        d.cluster,
        h.pool,
        d.day,
        h.idle,
        sum(h.gpus * greatest(0, epoch(least(h.held_to, d.day_end)) - epoch(greatest(h.held_from, d.day)))) as gpu_s
    from days as d
    inner join held as h
        on h.cluster = d.cluster and h.held_from < d.day_end and h.held_to > d.day
    group by d.cluster, h.pool, d.day, h.idle
),

allocated as (
    select cluster, pool, day, gpu_s as allocated_gpu_s from held_daily where not idle
),

hoarded as (
    select cluster, pool, day, gpu_s as hoarded_gpu_s from held_daily where idle
),

final as (
    select
        c.cluster,
        c.pool,
        c.day,
        c.capacity_gpu_s / 3600.0 as capacity_gpu_hours,
        coalesce(a.allocated_gpu_s, 0) / 3600.0 as allocated_gpu_hours,
        greatest(0, c.capacity_gpu_s - coalesce(a.allocated_gpu_s, 0)) / 3600.0 as unallocated_gpu_hours,
        case when c.cluster in (select cluster from sampled) then coalesce(h.hoarded_gpu_s, 0) / 3600.0 end
            as hoarded_gpu_hours,
        greatest(0, c.capacity_gpu_s - coalesce(a.allocated_gpu_s, 0)) / nullif(c.capacity_gpu_s, 0)
            as unallocated_share,
        case when c.cluster in (select cluster from sampled) then coalesce(h.hoarded_gpu_s, 0) end
            / nullif(a.allocated_gpu_s, 0) as hoarded_share_of_allocated
    from capacity as c
    left join allocated as a on a.cluster = c.cluster and a.pool = c.pool and a.day = c.day
    left join hoarded as h on h.cluster = c.cluster and h.pool = c.pool and h.day = c.day
    where c.capacity_gpu_s > 0
)

select * from final
