-- Ground truth that only the simulator knows. Tests compare the analytics,
-- which see only the raw tables, with these.

-- Every preemption as the simulator executed it.
CREATE TABLE sim_truth_preemptions (
    cluster               VARCHAR NOT NULL,
    victim_job_id         VARCHAR NOT NULL,
    victim_run            INTEGER NOT NULL,
    time                  TIMESTAMPTZ NOT NULL,
    preemptor_job_id      VARCHAR NOT NULL,
    pool                  VARCHAR NOT NULL,
    gpus                  INTEGER NOT NULL,
    run_start             TIMESTAMPTZ NOT NULL,
    last_checkpoint_time  TIMESTAMPTZ,           -- NULL: no checkpoint in this run
    lost_gpu_s            DOUBLE NOT NULL,       -- gpus x (time - coalesce(last checkpoint, run start))
    restart_time          TIMESTAMPTZ,           -- NULL: not restarted by the end of the simulation
    requeue_delay_s       DOUBLE,
    warmup_s              DOUBLE NOT NULL,       -- restart warm-up the next run pays before progress resumes
    source                VARCHAR NOT NULL,
    _load_id              VARCHAR NOT NULL,
    PRIMARY KEY (cluster, victim_job_id, victim_run)
);

-- GPU-seconds each run held while idle (hoarding behaviour the simulator injected).
CREATE TABLE sim_truth_hoarding (
    cluster        VARCHAR NOT NULL,
    job_id         VARCHAR NOT NULL,
    run            INTEGER NOT NULL,
    idle_start     TIMESTAMPTZ NOT NULL,
    idle_end       TIMESTAMPTZ NOT NULL,
    gpus           INTEGER NOT NULL,
    idle_gpu_s     DOUBLE NOT NULL,
    source         VARCHAR NOT NULL,
    _load_id       VARCHAR NOT NULL,
    PRIMARY KEY (cluster, job_id, run, idle_start)
);
