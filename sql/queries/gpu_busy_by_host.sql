-- Mean GPU busy share and sampled GPU-hours per host over the last 7 days of samples.
WITH recent AS (
    SELECT cluster, host, gpu_uuid, gpu_instance, time, busy
    FROM gpu_samples
    WHERE time > (SELECT max(time) FROM gpu_samples) - INTERVAL 7 DAY
),

final AS (
    SELECT cluster, host, count(DISTINCT (gpu_uuid, gpu_instance)) AS gpus, count(*) AS samples,
           round(avg(busy), 3) AS mean_busy, min(time) AS first_sample, max(time) AS last_sample
    FROM recent
    GROUP BY cluster, host
)

SELECT * FROM final ORDER BY mean_busy, cluster, host
