-- The expected requeue wait (sql/views/expected_requeue.sql) reads its window from analytics.requeue_window_s.
ALTER TABLE analytics_params ADD COLUMN requeue_window_s DOUBLE;

-- The live preemption cost of every running job (analytics/livecost.py, docs/figures.md section 7), one row per
-- job per computation. Keyed by the computation's instant: computing again at the same instant replaces the
-- same rows with the same figures, and history older than live_cost.keep_days is deleted by the next computation.
-- A component that cannot be computed is NULL and `unknown` names the missing input; cost_gpu_s is then NULL too.
CREATE TABLE live_costs (
    cluster                  VARCHAR NOT NULL,
    job_id                   VARCHAR NOT NULL,
    run                      INTEGER NOT NULL,
    pool                     VARCHAR,
    tier                     VARCHAR,
    team                     VARCHAR,
    user_name                VARCHAR,
    preemptible              BOOLEAN,
    gpus                     INTEGER,
    computed_at              TIMESTAMPTZ NOT NULL,
    run_start                TIMESTAMPTZ,
    last_checkpoint_time     TIMESTAMPTZ,
    at_risk_s                DOUBLE,           -- progress (seconds) lost if stopped now: progress_at_risk_s
    at_risk_gpu_s            DOUBLE,
    expected_warmup_s        DOUBLE,
    warmup_basis             VARCHAR,          -- job | team | pool: whose measured warm-ups gave expected_warmup_s
    warmup_gpu_s             DOUBLE,
    expected_requeue_s       DOUBLE,
    requeue_gpu_s            DOUBLE,
    cost_gpu_s               DOUBLE,
    near_completion_share    DOUBLE,
    job_preemptions_recent   INTEGER,
    team_preemptions_recent  INTEGER,
    basis                    VARCHAR,          -- checkpoint | declared | assumed
    unknown                  VARCHAR,          -- the missing inputs, '; '-separated; NULL when none
    PRIMARY KEY (cluster, job_id, computed_at)
);

-- One row per computation, also when no job was running: the latest computation says which jobs run now.
CREATE TABLE live_cost_computations (
    computed_at  TIMESTAMPTZ PRIMARY KEY,
    jobs         INTEGER NOT NULL
);

-- The rows of the latest computation: one per job running then.
CREATE VIEW live_costs_latest AS
SELECT c.*
FROM live_costs AS c
WHERE c.computed_at = (SELECT max(computed_at) FROM live_cost_computations);
