-- The audit of actions (analytics/actions.py, docs/figures.md "Actions"): one
-- row per hold an action put on a job (a Kueue priority boost, a KAI or Slurm
-- protection), in dry-run (nothing sent to the scheduler) or enforce mode.
-- A row is open while `undone_at` is NULL; `detail` is the JSON the effector's
-- apply returned, which its undo needs (NULL while apply has not answered).
-- The row is written before the scheduler is changed and closed after the
-- change is removed, so a crash leaves a row that the next start reconciles
-- with what the scheduler holds, never a mark nobody knows about.
CREATE SEQUENCE actions_id START 1;

CREATE TABLE actions (
    id           BIGINT PRIMARY KEY DEFAULT nextval('actions_id'),
    action       VARCHAR NOT NULL,      -- kueue_boost | kai_protect | slurm_protect
    scheduler    VARCHAR NOT NULL,      -- kueue | kai | slurm
    cluster      VARCHAR NOT NULL,
    job_id       VARCHAR NOT NULL,
    level        INTEGER NOT NULL,      -- the boost (Kueue), 1 for a protection
    mode         VARCHAR NOT NULL,      -- dry-run | enforce
    why          VARCHAR NOT NULL,      -- the threshold crossed and the job's figures
    cost_gpu_s   DOUBLE,                -- the job's live cost when applied (NULL: unknown)
    applied_at   TIMESTAMPTZ NOT NULL,  -- when this row's level was set (`at` is a reserved word)
    held_since   TIMESTAMPTZ NOT NULL,  -- when the job's hold began (a Kueue step keeps it)
    undone_at    TIMESTAMPTZ,
    undo_why     VARCHAR,
    detail       VARCHAR
);
CREATE INDEX actions_job ON actions (cluster, job_id);
