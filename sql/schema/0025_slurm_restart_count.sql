-- How many times the scheduler had restarted a job before this run, as it counts them: Slurm's `restart_cnt` in
-- accounting, from 24.11 (data_parser v0.0.42 on, src/plugins/data_parser/v0.0.42/parsers.c of slurm-24-11-0-1;
-- `Restarts` in text), raised by every requeue, preemption requeue and node-failure requeue
-- (src/slurmctld/job_mgr.c). A run numbered above restarts_before + 1 had earlier runs no record shows (a
-- document read without --duplicates, purged records): run_ends counts them (`restarts_hidden`). NULL where the
-- source does not count (Slurm before 24.11, --parsable2 text, other schedulers).
ALTER TABLE job_runs ADD COLUMN restarts_before INTEGER;
