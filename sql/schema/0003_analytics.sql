-- Derived tables that `preemptlens analyze` maintains. Consumers read the
-- views in sql/views, which build on these; nothing here is raw data, so any
-- of it can be dropped and rebuilt from the contract tables.

-- The analytics settings in force (one row), so that plain SQL views can use
-- them; `analyze` rewrites it from the [analytics] configuration section.
CREATE TABLE analytics_params (
    idle_busy_below          DOUBLE NOT NULL,   -- a sample is idle when busy < this ...
    idle_zero_rule           BOOLEAN NOT NULL,  -- ... or, with the jobstats rule, when busy = 0
    hoarding_window_s        DOUBLE NOT NULL,
    sample_step_s            DOUBLE NOT NULL,   -- resolved (inferred or configured) sampling step
    link_tolerance_s         DOUBLE NOT NULL,
    near_completion_share    DOUBLE NOT NULL,
    early_victim_s           DOUBLE NOT NULL,
    long_runner_factor       DOUBLE NOT NULL,
    trend_weeks              INTEGER NOT NULL,
    scarce_allocation_share  DOUBLE NOT NULL,
    scarce_hours_share       DOUBLE NOT NULL,
    scarce_wait_s            DOUBLE NOT NULL,
    high_tier_share_max      DOUBLE NOT NULL,
    high_tier_slope_max      DOUBLE NOT NULL,
    checkpoint_coverage_min  DOUBLE NOT NULL,
    loss_to_gain_max         DOUBLE NOT NULL,
    visibility_min           DOUBLE NOT NULL,
    reclaim_idle_share       DOUBLE NOT NULL
);

-- Value of one GPU-second of each tier's work, for the net-benefit figures.
CREATE TABLE analytics_tier_weights (
    tier    VARCHAR PRIMARY KEY,
    weight  DOUBLE NOT NULL
);

-- Contiguous idle stretches of one GPU (or MIG instance) while attributed to
-- one job, at least the hoarding window long. Built from gpu_samples by
-- gaps-and-islands; a missing sample ends a stretch (gaps are not idle time).
-- end_time is the last idle sample's time plus the sampling step. No key
-- index: the refresh deletes and re-inserts by time range.
CREATE TABLE gpu_idle_stretches (
    cluster       VARCHAR NOT NULL,
    host          VARCHAR NOT NULL,
    gpu_uuid      VARCHAR NOT NULL,
    gpu_instance  VARCHAR NOT NULL,
    job_id        VARCHAR NOT NULL,
    start_time    TIMESTAMPTZ NOT NULL,
    end_time      TIMESTAMPTZ NOT NULL,
    samples       BIGINT NOT NULL
);

-- Loads whose gpu_samples the stretches already reflect, and the settings
-- they were built with: what tells `analyze` which part to recompute.
CREATE TABLE analytics_loads_seen (
    load_id  VARCHAR PRIMARY KEY
);

CREATE TABLE analytics_state (
    name        VARCHAR PRIMARY KEY,
    value       VARCHAR NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
