-- Other ids a source knows a job by, for the GPU samples whose labels use
-- them. Slurm accounting names an array task "1230_4", but the prolog, and so
-- dcgm-exporter's `hpc_job` and jobstats' `jobid` labels, see the task's own
-- numeric id ($SLURM_JOB_ID, e.g. 1234). analytics.attribution resolves a
-- sample labelled with an alias to the aliased job's run at the sample's time.
CREATE TABLE job_aliases (
    cluster   VARCHAR NOT NULL,
    alias     VARCHAR NOT NULL,   -- the id as the exporters label samples
    job_id    VARCHAR NOT NULL,   -- jobs.job_id
    source    VARCHAR NOT NULL,
    _load_id  VARCHAR NOT NULL,
    PRIMARY KEY (cluster, alias, job_id)
);
