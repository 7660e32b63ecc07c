-- Lookups of analytics.attribution: which job an idle GPU sample belongs to
-- when its job label is not a recorded job. Derived from jobs, job_runs,
-- job_aliases and gpu_samples; `analyze` rebuilds them.

-- Runs of the jobs a label other than the job id names ("namespace/pod" of a
-- pod, a job_aliases alias), with their times: a label may name different
-- jobs at different times.
CREATE TABLE sample_alias_runs (
    cluster     VARCHAR NOT NULL,
    label       VARCHAR NOT NULL,
    job_id      VARCHAR NOT NULL,
    start_time  TIMESTAMPTZ NOT NULL,
    end_time    TIMESTAMPTZ NOT NULL     -- 'infinity' while running
);

-- Per host, the stretches of time during which exactly one run was on it and
-- held all of its GPUs: the only times the host alone names a sample's job.
CREATE TABLE sample_host_segments (
    cluster     VARCHAR NOT NULL,
    host        VARCHAR NOT NULL,
    seg_start   TIMESTAMPTZ NOT NULL,
    seg_end     TIMESTAMPTZ NOT NULL,
    job_id      VARCHAR NOT NULL
);

-- Each GPU a host has reported samples for: the host's size where the pools
-- table does not give the node size.
CREATE TABLE sample_host_gpus (
    cluster   VARCHAR NOT NULL,
    host      VARCHAR NOT NULL,
    gpu_uuid  VARCHAR NOT NULL
);
