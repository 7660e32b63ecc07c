-- What `preemptlens suggest` found, kept for the dashboard and the weekly
-- report. Derived, not raw: a re-run over the same cluster and window replaces
-- that window's rows.

-- How well the replay reproduced the window under the policy in force: the
-- error every what-if must be read with.
CREATE TABLE replay_validation (
    cluster                   VARCHAR NOT NULL,
    window_start              TIMESTAMPTZ NOT NULL,
    window_end                TIMESTAMPTZ NOT NULL,
    jobs                      BIGINT NOT NULL,     -- jobs replayed
    policy                    VARCHAR NOT NULL,    -- JSON: the policy in force and where each value came from
    observed_preemptions      BIGINT NOT NULL,
    replayed_preemptions      BIGINT NOT NULL,
    observed_lost_gpu_h       DOUBLE NOT NULL,
    replayed_lost_gpu_h       DOUBLE NOT NULL,
    observed_high_wait_s      DOUBLE,              -- median queue wait of critical and high jobs
    replayed_high_wait_s      DOUBLE,
    preemptions_error         DOUBLE,              -- relative errors; NULL when the observed figure is 0
    lost_gpu_h_error          DOUBLE,
    high_wait_error           DOUBLE,
    reproduces                BOOLEAN NOT NULL,    -- every error within tuning.validation_tolerance
    notes                     VARCHAR NOT NULL,    -- what was measured and what approximated
    created_at                TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster, window_start, window_end)
);

-- One row per suggestion, in rank order. snippets is a JSON object from
-- scheduler (slurm, kueue, kai, volcano, kubernetes) to configuration text.
CREATE TABLE suggestions (
    cluster                   VARCHAR NOT NULL,
    window_start              TIMESTAMPTZ NOT NULL,
    window_end                TIMESTAMPTZ NOT NULL,
    rank                      INTEGER NOT NULL,
    kind                      VARCHAR NOT NULL,    -- not_yet | min_run_time | near_completion | grace_time | checkpoint_interval | tier_limits | idle_reclaim | repeat_victims
    subject                   VARCHAR NOT NULL,    -- '' for the cluster, else the team or pool/team it applies to
    title                     VARCHAR NOT NULL,
    setting                   VARCHAR NOT NULL,
    current_value             VARCHAR,
    proposed_value            VARCHAR,
    evidence                  VARCHAR NOT NULL,
    effect                    VARCHAR NOT NULL,
    lost_gpu_h_change         DOUBLE,              -- over the window; negative is a saving
    high_wait_change_s        DOUBLE,
    victims_per_week_change   DOUBLE,
    saving_gpu_h              DOUBLE NOT NULL,
    snippets                  VARCHAR NOT NULL,
    replay_reproduces         BOOLEAN NOT NULL,
    created_at                TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster, window_start, window_end, kind, subject)
);
