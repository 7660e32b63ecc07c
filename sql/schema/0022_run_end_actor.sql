-- Who asked for a run's end, where the scheduler records it (Slurm: a cancel's requester, JSON's
-- `kill_request_user` as a user name, or "uid N" from sacct's text State "CANCELLED by N"); NULL where the source
-- does not say. run_ends tells a cancel by the job's own user from one by an admin (cause_by) with it.
ALTER TABLE job_runs ADD COLUMN ended_by VARCHAR;
