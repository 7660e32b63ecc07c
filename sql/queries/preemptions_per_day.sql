-- Preempted runs per day, cluster and pool, with the GPUs they held.
WITH preempted AS (
    SELECT cluster, pool, gpus, date_trunc('day', end_time) AS day
    FROM job_runs
    WHERE state = 'preempted' AND end_time IS NOT NULL
),

final AS (
    SELECT day, cluster, pool, count(*) AS preemptions, sum(gpus) AS gpus_preempted
    FROM preempted
    GROUP BY day, cluster, pool
)

SELECT * FROM final ORDER BY day, cluster, pool
