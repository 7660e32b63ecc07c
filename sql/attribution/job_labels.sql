-- Every label that names a recorded job besides its id: a Kubernetes job's namespace/name (the scheduler collector
-- keys it by UID, exporters name the pod) and the aliases a collector recorded (job_aliases: a Slurm array task's
-- own numeric id). GPU samples (analytics/attribution.py) and checkpoint sources (Warehouse.recorded_runs) resolve
-- labels through this one list.
SELECT cluster, team || '/' || name AS label, job_id FROM jobs
WHERE source = 'kubernetes' AND team IS NOT NULL AND name IS NOT NULL
UNION
SELECT cluster, alias AS label, job_id FROM job_aliases
