-- The raw contract between collectors and analytics.
-- Every source writes these tables through the load API only; analytics and
-- dashboards read them (mostly through views). Time is UTC TIMESTAMPTZ,
-- durations are seconds, ids are strings. Every row names its `source` and the
-- load that last wrote it (`_load_id`, see `_loads`).

CREATE TABLE _loads (
    load_id      VARCHAR PRIMARY KEY,
    source       VARCHAR NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    loaded       BIGINT NOT NULL DEFAULT 0,
    unchanged    BIGINT NOT NULL DEFAULT 0,
    quarantined  BIGINT NOT NULL DEFAULT 0
);

-- Incremental cursors. Written in the same transaction as the rows they cover,
-- so a crash leaves either both or neither.
CREATE TABLE _watermarks (
    collector    VARCHAR NOT NULL,
    cluster      VARCHAR NOT NULL,
    stream       VARCHAR NOT NULL,
    cursor       VARCHAR NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (collector, cluster, stream)
);

-- Records that failed validation: which source, which record (file:line,
-- job id, series ...), which field and why. Re-reading the same bad record
-- replaces its row instead of adding another.
CREATE TABLE quarantine (
    source        VARCHAR NOT NULL,
    target_table  VARCHAR NOT NULL,
    record        VARCHAR NOT NULL,
    field         VARCHAR NOT NULL,
    reason        VARCHAR NOT NULL,
    raw           VARCHAR,
    _load_id      VARCHAR NOT NULL,
    PRIMARY KEY (source, target_table, record)
);

-- GPU capacity of a pool (partition, node pool, Kueue flavor) from valid_from on.
CREATE TABLE pools (
    cluster        VARCHAR NOT NULL,
    pool           VARCHAR NOT NULL,
    valid_from     TIMESTAMPTZ NOT NULL,
    gpus           INTEGER NOT NULL,
    gpus_per_node  INTEGER,
    source         VARCHAR NOT NULL,
    _load_id       VARCHAR NOT NULL,
    PRIMARY KEY (cluster, pool, valid_from)
);

-- One row per job, whatever the number of runs.
CREATE TABLE jobs (
    cluster                VARCHAR NOT NULL,
    job_id                 VARCHAR NOT NULL,
    name                   VARCHAR,
    team                   VARCHAR,          -- account, namespace or team label
    user_name              VARCHAR,
    priority_class         VARCHAR,          -- the source's own name: partition, QOS, PriorityClass
    priority_value         DOUBLE,           -- the source's own number, where it has one
    tier                   VARCHAR NOT NULL, -- critical | high | normal | low (config maps to it)
    preemptible            BOOLEAN NOT NULL,
    pool                   VARCHAR,
    gpus                   INTEGER NOT NULL,
    submit_time            TIMESTAMPTZ NOT NULL,
    checkpoint_interval_s  DOUBLE,           -- declared by the job, where known
    work_s                 DOUBLE,           -- run time the job needs without interruption, where known
    source                 VARCHAR NOT NULL,
    _load_id               VARCHAR NOT NULL,
    PRIMARY KEY (cluster, job_id)
);

-- One row per run (attempt) of a job. A run that is still going has no
-- end_time and state 'running'; a later load replaces the row when it ends.
CREATE TABLE job_runs (
    cluster           VARCHAR NOT NULL,
    job_id            VARCHAR NOT NULL,
    run               INTEGER NOT NULL,      -- 1 for the first attempt
    pool              VARCHAR,
    hosts             VARCHAR,               -- node list as the source prints it
    gpus              INTEGER NOT NULL,
    submit_time       TIMESTAMPTZ,           -- when this attempt was (re)queued
    eligible_time     TIMESTAMPTZ,           -- when it was allowed to start
    start_time        TIMESTAMPTZ,
    end_time          TIMESTAMPTZ,
    state             VARCHAR NOT NULL,      -- pending | running | completed | failed | cancelled | preempted | requeued | timeout | node_fail
    preemptor_job_id  VARCHAR,               -- for state = preempted, where the source says
    reason            VARCHAR,               -- the source's reason text or code
    source            VARCHAR NOT NULL,
    _load_id          VARCHAR NOT NULL,
    PRIMARY KEY (cluster, job_id, run)
);

-- Victim-to-preemptor links that a source reports apart from the runs
-- (the slurmctld log, Kubernetes events). Joined to preempted runs by time.
CREATE TABLE preemption_links (
    cluster           VARCHAR NOT NULL,
    victim_job_id     VARCHAR NOT NULL,
    time              TIMESTAMPTZ NOT NULL,
    preemptor_job_id  VARCHAR,
    reason            VARCHAR,
    source            VARCHAR NOT NULL,
    _load_id          VARCHAR NOT NULL,
    PRIMARY KEY (cluster, victim_job_id, time)
);

-- Checkpoints written and progress reported by a job. `step` is the job's
-- own monotonic progress counter (training step, samples, work seconds).
CREATE TABLE checkpoints (
    cluster   VARCHAR NOT NULL,
    job_id    VARCHAR NOT NULL,
    run       INTEGER,
    time      TIMESTAMPTZ NOT NULL,
    kind      VARCHAR NOT NULL,   -- checkpoint | progress
    step      DOUBLE,
    source    VARCHAR NOT NULL,
    _load_id  VARCHAR NOT NULL,
    PRIMARY KEY (cluster, job_id, kind, time)
);

-- One GPU (or MIG instance) at one instant, downsampled to the collection
-- step. No primary key index: at thousands of GPUs the index would outgrow
-- memory; the load API merges on (cluster, host, gpu_uuid, gpu_instance, time)
-- within the batch's time range instead.
CREATE TABLE gpu_samples (
    cluster       VARCHAR NOT NULL,
    host          VARCHAR NOT NULL,
    gpu_uuid      VARCHAR NOT NULL,
    gpu_instance  VARCHAR NOT NULL DEFAULT '',  -- MIG GPU_I_ID, '' for a whole GPU
    gpu_index     INTEGER,
    time          TIMESTAMPTZ NOT NULL,
    busy          DOUBLE,          -- 0..1, DCGM_FI_PROF_GR_ENGINE_ACTIVE (or GPU_UTIL / 100)
    mem_used_mib  DOUBLE,
    power_w       DOUBLE,
    job_id        VARCHAR,         -- attributed from exporter labels, where present
    source        VARCHAR NOT NULL,
    _load_id      VARCHAR NOT NULL
);
