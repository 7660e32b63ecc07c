-- Scorecard Q1 measures scarcity in ways preemption cannot mask (docs/figures.md,
-- section 5): the median high-priority wait (scarce_wait_s), which preemption
-- itself keeps short, gives way to the queue-pressure share, the wait of the
-- tiers that do not preempt and the high tiers' wait without preemption.
-- analytics_params is rewritten by every `analyze`, so it is rebuilt here.
DROP TABLE analytics_params;

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
    scarce_queue_share       DOUBLE NOT NULL,
    scarce_hours_share       DOUBLE NOT NULL,
    scarce_queue_wait_s      DOUBLE NOT NULL,
    scarce_high_wait_s       DOUBLE NOT NULL,
    high_tier_share_max      DOUBLE NOT NULL,
    high_tier_slope_max      DOUBLE NOT NULL,
    checkpoint_coverage_min  DOUBLE NOT NULL,
    loss_to_gain_max         DOUBLE NOT NULL,
    visibility_min           DOUBLE NOT NULL,
    reclaim_idle_share       DOUBLE NOT NULL
);
