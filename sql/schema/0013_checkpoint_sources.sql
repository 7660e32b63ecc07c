-- Checkpoints and progress read from where jobs write them (collectors/checkpoints: checkpoint files, training
-- logs, Prometheus metrics, Kubernetes annotations), and what the ledger and the live cost say of their source.

-- How long a checkpoint's save took, where the source gives it (the first to the last file written, a "saving"
-- to a "saved" log line); NULL where it does not.
ALTER TABLE checkpoints ADD COLUMN save_s DOUBLE;
-- The collector stream and the layout or preset that found the row (files:hf_trainer, log:megatron, prometheus,
-- annotation); NULL where the row's source says it alone (import, simulator).
ALTER TABLE checkpoints ADD COLUMN origin VARCHAR;

-- Where a job works and writes its output, as the scheduler records it (Slurm's WorkDir, StdOut, StdErr with
-- their patterns such as %j expanded where the source expands them): the checkpoint collector finds a job's
-- checkpoint directories and training log through them. NULL where the source does not say.
ALTER TABLE jobs ADD COLUMN work_dir VARCHAR;
ALTER TABLE jobs ADD COLUMN stdout_path VARCHAR;
ALTER TABLE jobs ADD COLUMN stderr_path VARCHAR;

-- The live cost names the stream its progress at risk comes from, as the ledger does (docs/figures.md).
ALTER TABLE live_costs ADD COLUMN progress_source VARCHAR;
