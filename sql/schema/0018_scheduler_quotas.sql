-- The quotas and pools a scheduler is configured with, as the collectors read them (docs/figures.md, section
-- 10, adoption order): Slurm partitions (PriorityTier, nodes), QOS and accounts with a GPU limit (GrpTRES);
-- Kueue ClusterQueues (GPU nominalQuota and borrowingLimit, cohort); KAI queues (GPU quota and limit, parent).
-- Raw, like pools: the article's first step (quotas, queues and tiered pools before preemption) is read from
-- the scheduler, not inferred from a failed question. A collection writes only what changed since the last
-- one (its watermark holds what it saw), with the time it saw the change; an object deleted since is written
-- once more with `removed` true.
CREATE TABLE scheduler_quotas (
    cluster        VARCHAR NOT NULL,
    scheduler      VARCHAR NOT NULL,   -- slurm | kueue | kai
    kind           VARCHAR NOT NULL,   -- partition | qos | account | cluster_queue | queue
    name           VARCHAR NOT NULL,
    parent         VARCHAR,            -- Kueue cohort, KAI parent queue, the account of a user association
    gpu_quota      DOUBLE,             -- GPUs guaranteed (Kueue nominalQuota, KAI quota); NULL: none, or unbounded
    gpu_limit      DOUBLE,             -- most GPUs it may hold (Slurm GrpTRES gres/gpu, Kueue nominal + borrowing,
                                       -- KAI limit); NULL: no bound
    priority_tier  INTEGER,            -- Slurm partition PriorityTier
    nodes          VARCHAR,            -- Slurm partition node list, as scontrol prints it
    observed_at    TIMESTAMPTZ NOT NULL,  -- when the collector first saw the object as it is now
    removed        BOOLEAN NOT NULL,      -- gone from the scheduler
    source         VARCHAR NOT NULL,
    _load_id       VARCHAR NOT NULL,
    PRIMARY KEY (cluster, scheduler, kind, name)
);
