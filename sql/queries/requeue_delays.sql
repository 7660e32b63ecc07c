-- How long preempted runs waited before their next run started, per cluster and pool (seconds).
WITH requeues AS (
    SELECT r.cluster, r.pool, epoch(n.start_time) - epoch(r.end_time) AS delay_s
    FROM job_runs r
    JOIN job_runs n ON n.cluster = r.cluster AND n.job_id = r.job_id AND n.run = r.run + 1
    WHERE r.state = 'preempted' AND n.start_time IS NOT NULL
),

final AS (
    SELECT cluster, pool, count(*) AS requeues, round(median(delay_s)) AS median_s,
           round(quantile_cont(delay_s, 0.9)) AS p90_s, round(max(delay_s)) AS max_s
    FROM requeues
    GROUP BY cluster, pool
)

SELECT * FROM final ORDER BY cluster, pool
