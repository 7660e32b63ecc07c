-- The cluster's GPU sample grid, on which its recorded idle stretches begin.
-- Its step is the median spacing of one GPU's samples in the window (as hoarding.infer_steps reads a cluster's), its phase
-- a sample's time modulo the step: a Prometheus range query's grid is its start plus multiples of the step, an
-- exporter's the wall clock's. No step where the window holds no samples: the replay has no idle stretch to place.
with one as (
    select host, gpu_uuid, gpu_instance from gpu_samples
    where cluster = $c and time >= $t0 and time < $t1
    limit 1
),
times as (
    select epoch(s.time) as t
    from gpu_samples as s
    inner join one using (host, gpu_uuid, gpu_instance)
    where s.cluster = $c and s.time >= $t0 and s.time < $t1
),
gaps as (
    select t, t - lag(t) over (order by t) as gap from times
)
select median(gap) filter (where gap > 0) as step_s, min(t) as first_s from gaps
