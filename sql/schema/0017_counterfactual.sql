-- Does preemption pay here? The recorded window replayed under no preemption,
-- today's policy, today's policy with trigger thresholds, and the best
-- alternative `suggest` found (docs/figures.md, section 10), and the one
-- verdict over all the evidence (analytics/scorecard.py). Derived, not raw:
-- `analyze` rewrites a cluster's rows when its data changed, `suggest` its
-- best alternative.

-- One row per cluster: the window replayed, the replay's error under the
-- actual policy, and the headline against no preemption (GPU-hours).
CREATE TABLE counterfactual_runs (
    cluster                   VARCHAR PRIMARY KEY,
    window_start              TIMESTAMPTZ NOT NULL,
    window_end                TIMESTAMPTZ NOT NULL,
    jobs                      BIGINT NOT NULL,
    fingerprint               VARCHAR NOT NULL,    -- of the inputs: an unchanged one is not replayed again
    preemptions_error         DOUBLE,              -- relative errors of the replay under the actual policy
    lost_gpu_h_error          DOUBLE,
    high_wait_error           DOUBLE,
    reproduces                BOOLEAN NOT NULL,
    high_wait_saved_gpu_h     DOUBLE,              -- critical+high queue time saved (GPU-hours), today vs none
    thrown_away_gpu_h         DOUBLE,              -- work thrown away today (lost progress + warm-up)
    lower_wait_added_gpu_h    DOUBLE,              -- normal+low queue time added
    net_value                 DOUBLE,              -- tier-weighted GPU-hours, today vs none
    net_low                   DOUBLE,              -- bootstrap interval over submission days
    net_high                  DOUBLE,
    breakeven_factor          DOUBLE,              -- multiplier of the critical and high weights at which net = 0
    breakeven                 VARCHAR NOT NULL,    -- factor | never | always | unknown
    tier_weights              VARCHAR NOT NULL,    -- JSON: the weights in force
    notes                     VARCHAR NOT NULL,    -- what the replay measured and approximated
    computed_at               TIMESTAMPTZ NOT NULL
);

-- One row per cluster and scenario: none | today | trigger_<seconds> | best.
CREATE TABLE counterfactual_scenarios (
    cluster                   VARCHAR NOT NULL,
    scenario                  VARCHAR NOT NULL,
    label                     VARCHAR NOT NULL,
    trigger_wait_s            DOUBLE,
    policy                    VARCHAR NOT NULL,    -- JSON of the replayed policy
    preemptions               BIGINT NOT NULL,
    net_value                 DOUBLE,              -- against no preemption, tier-weighted GPU-hours
    net_low                   DOUBLE,
    net_high                  DOUBLE,
    PRIMARY KEY (cluster, scenario)
);

-- One row per cluster, scenario and tier (and 'all').
CREATE TABLE counterfactual_figures (
    cluster                   VARCHAR NOT NULL,
    scenario                  VARCHAR NOT NULL,
    tier                      VARCHAR NOT NULL,
    jobs                      BIGINT NOT NULL,
    wait_p50_s                DOUBLE,              -- first-start wait (not started: to the window's end)
    wait_p90_s                DOUBLE,
    completion_p50_s          DOUBLE,              -- first submission to completion, completed jobs
    completed                 BIGINT NOT NULL,
    preemptions               BIGINT NOT NULL,     -- of this tier's jobs
    thrown_away_gpu_h         DOUBLE NOT NULL,
    victim_waiting_gpu_h      DOUBLE NOT NULL,
    waiting_gpu_h             DOUBLE NOT NULL,     -- all queue time: first waits and waits to restart
    busy_gpu_h                DOUBLE NOT NULL,     -- allocated and not idle
    PRIMARY KEY (cluster, scenario, tier)
);

-- One row per cluster and UTC hour of the window: the GPU-seconds allocated when the recorded jobs are
-- replayed without preemption. Scorecard Q1's busy hours read it (less the idle GPU-seconds measured), so that
-- scarcity reads the same whatever the policy in force (preemption packs GPUs differently and throws work away).
CREATE TABLE counterfactual_hours (
    cluster                   VARCHAR NOT NULL,
    hour                      TIMESTAMPTZ NOT NULL,
    allocated_gpu_s           DOUBLE NOT NULL,
    PRIMARY KEY (cluster, hour)
);

-- One row per cluster: the verdict over the four questions, the counterfactual
-- net and the avoidable share, worded once (analytics/scorecard.py).
CREATE TABLE readiness_verdict (
    cluster                   VARCHAR PRIMARY KEY,
    verdict                   VARCHAR NOT NULL,
    borderline                BOOLEAN NOT NULL,
    reasons                   VARCHAR NOT NULL,    -- JSON list of sentences
    fix_first                 VARCHAR,             -- the actions to take first, in suggest's order
    fix_kinds                 VARCHAR NOT NULL,    -- JSON list of suggestion kinds behind fix_first
    fixes_ranked              BOOLEAN NOT NULL,    -- true when suggest's ranking ordered them
    adoption_step             INTEGER,             -- 1..5 of the article's adoption order, NULL unknown
    adoption                  VARCHAR NOT NULL,    -- the step in words
    computed_at               TIMESTAMPTZ NOT NULL
);

-- The verdict's settings (trend_min_weeks, avoidable_share_max, the bootstrap's samples and confidence)
-- replace scarce_high_wait_s, which the counterfactual's queue time replaces. analytics_params is rewritten
-- by every `analyze` in the settings' order, so it is rebuilt here in that order.
DROP TABLE analytics_params;
CREATE TABLE analytics_params (
    idle_busy_below              DOUBLE,
    idle_zero_rule               BOOLEAN,
    hoarding_window_s            DOUBLE,
    sample_step_s                DOUBLE,
    link_tolerance_s             DOUBLE,
    near_completion_share        DOUBLE,
    early_victim_s               DOUBLE,
    long_runner_factor           DOUBLE,
    trend_weeks                  INTEGER,
    scarce_allocation_share      DOUBLE,
    scarce_queue_share           DOUBLE,
    scarce_hours_share           DOUBLE,
    scarce_queue_wait_s          DOUBLE,
    high_tier_share_max          DOUBLE,
    high_tier_slope_max          DOUBLE,
    checkpoint_coverage_min      DOUBLE,
    loss_to_gain_max             DOUBLE,
    trend_min_weeks              INTEGER,
    visibility_min               DOUBLE,
    reclaim_idle_share           DOUBLE,
    avoidable_share_max          DOUBLE,
    readiness_bootstrap_samples  INTEGER,
    readiness_confidence         DOUBLE,
    requeue_window_s             DOUBLE,
    loss_coverage_min            DOUBLE
);
