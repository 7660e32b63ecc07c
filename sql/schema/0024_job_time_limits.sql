-- A job's time limit, what Slurm's backfill plans a run's end from (src/plugins/sched/backfill/backfill.c,
-- slurm-22-05-11-1: a running job ends at its start plus its time limit, an unlimited one in a year), so the
-- replay reserves a blocked job's start as the scheduler did (analytics/simulator/engine.py, `_planned_end`).
-- time_limit_s: the limit in seconds where it is finite; NULL where it is unlimited or unknown.
-- time_unlimited: true where the source states no limit (Slurm UNLIMITED, a partition with MaxTime=UNLIMITED
-- and no DefaultTime); NULL where the source does not say (the simulator, Kubernetes, files without it).
ALTER TABLE jobs ADD COLUMN time_limit_s DOUBLE;
ALTER TABLE jobs ADD COLUMN time_unlimited BOOLEAN;
