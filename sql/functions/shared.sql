-- Named functions of the shared SQL whose one definition both engines run: as written on Spark, as a macro
-- of the same name, arguments and body on DuckDB (warehouse.define_functions). A figure's rule that SQL and
-- Python both apply lives here, once.

-- A GPU sample is idle when nothing ran on it: busy = 0 under the zero rule (jobstats), else busy below the threshold.
CREATE OR REPLACE TEMPORARY FUNCTION is_idle(busy DOUBLE, zero_rule BOOLEAN, busy_below DOUBLE) RETURNS BOOLEAN RETURN
    CASE WHEN zero_rule THEN busy = 0 ELSE busy < busy_below END;

-- The basis of a run's lost progress (docs/figures.md): 'checkpoint' when its job wrote checkpoints, else 'rollback'
-- when the step its restart resumed from is known (progress reports alone: the goodput method), else 'declared' when
-- the job declared a checkpoint interval, else 'assumed' (nothing saved since the run started).
CREATE OR REPLACE TEMPORARY FUNCTION progress_basis(
    has_checkpoints BOOLEAN, has_rollback BOOLEAN, checkpoint_interval_s DOUBLE
) RETURNS STRING RETURN
    CASE
        WHEN has_checkpoints THEN 'checkpoint'
        WHEN has_rollback THEN 'rollback'
        WHEN checkpoint_interval_s IS NOT NULL THEN 'declared'
        ELSE 'assumed'
    END;

-- The progress (seconds of one GPU's work) a run loses if stopped run_age_s after its start: the time since its
-- last checkpoint in this run (since_checkpoint_s, from the run's start when it saved none) when measured, or since
-- it first reached the step its restart resumed from (since_checkpoint_s too) by rollback; half the declared
-- interval once the run is that old, when declared; else all of it. The ledger's lost_s and the live cost's time at
-- risk are this one rule.
CREATE OR REPLACE TEMPORARY FUNCTION progress_at_risk_s(
    basis STRING, since_checkpoint_s DOUBLE, run_age_s DOUBLE, checkpoint_interval_s DOUBLE
) RETURNS DOUBLE RETURN
    CASE
        WHEN basis IN ('checkpoint', 'rollback') THEN since_checkpoint_s
        WHEN basis = 'declared' AND run_age_s >= checkpoint_interval_s THEN checkpoint_interval_s / 2
        ELSE run_age_s
    END;

-- Whether a checkpoint saved a run's progress by time t: written by that run (or by a job that does not say which
-- run), after the run started and not after t. The ledger's last checkpoint before a preemption and the live cost's
-- last checkpoint before now are this one rule.
CREATE OR REPLACE TEMPORARY FUNCTION saves_run(
    checkpoint_run INT, checkpoint_time TIMESTAMP, run INT, run_start TIMESTAMP, t TIMESTAMP
) RETURNS BOOLEAN RETURN
    (checkpoint_run = run OR checkpoint_run IS NULL) AND checkpoint_time >= run_start AND checkpoint_time <= t;

-- Where a run's lost progress comes from (the ledger's and the live cost's progress_source): the collector stream
-- that found the checkpoint or step report (files:<layout>, log:<preset>, prometheus, annotation), else the row's
-- source (import:<file>, simulator, a scheduler for a declared interval).
CREATE OR REPLACE TEMPORARY FUNCTION stream_of(origin STRING, source STRING) RETURNS STRING RETURN
    coalesce(origin, source);

-- Whether a lost-progress basis is measured (docs/figures.md, loss coverage): the job's own checkpoints, or the
-- step it restarted from ('rollback'); a declared interval and the fallback to the run's age are not. The loss
-- coverage, the readiness scorecard's Q3 and the goodput split all ask this one question.
CREATE OR REPLACE TEMPORARY FUNCTION is_measured(basis STRING) RETURNS BOOLEAN RETURN
    coalesce(basis IN ('checkpoint', 'rollback'), false);
