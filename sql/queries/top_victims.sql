-- The 20 jobs preempted most often, with their team, tier and the GPU-hours their preempted runs had run.
WITH preempted AS (
    SELECT cluster, job_id, count(*) AS preempted_runs,
           sum(gpus * (epoch(end_time) - epoch(start_time))) / 3600 AS preempted_run_gpu_hours
    FROM job_runs
    WHERE state = 'preempted'
    GROUP BY cluster, job_id
),

final AS (
    SELECT p.cluster, p.job_id, j.name, j.team, j.tier, p.preempted_runs,
           round(p.preempted_run_gpu_hours, 2) AS preempted_run_gpu_hours
    FROM preempted p
    LEFT JOIN jobs j ON j.cluster = p.cluster AND j.job_id = p.job_id
)

SELECT * FROM final ORDER BY preempted_runs DESC, preempted_run_gpu_hours DESC, job_id LIMIT 20
