-- Each cluster's sampling step of gpu_samples (analytics/hoarding.py infer_steps: analytics.sample_step_s when
-- set, else the median spacing of one of its GPUs' samples), written by every `analyze` (refresh.write_params).
-- The idle-stretch scan reads a cluster's own step: one warehouse can hold clusters scraped every 15 s and
-- every 60 s. analytics_params.sample_step_s keeps the one step where every cluster has it, NULL where they differ.
CREATE TABLE IF NOT EXISTS analytics_sample_steps (
    cluster        VARCHAR NOT NULL PRIMARY KEY,
    sample_step_s  DOUBLE NOT NULL
);
