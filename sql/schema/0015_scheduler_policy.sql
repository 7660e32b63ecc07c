-- The preemption policy in force, as the scheduler states it (Slurm `scontrol
-- show config`, `scontrol show partition`, QOS from sacctmgr; Kueue
-- ClusterQueues; KAI Queues), so that the replay runs the scheduler's own
-- settings instead of guessing them from the ledger. A collector writes a whole
-- snapshot (every row read at once, one `valid_from`) when anything differs
-- from the last one; the snapshot in force at a time is the last one read at or
-- before it. `setting` is one of the normalized names of docs/import-format.md
-- (seconds for durations, `true`/`false` for yes/no); `raw` keeps the source's
-- own spelling.
CREATE TABLE scheduler_policy (
    cluster     VARCHAR NOT NULL,
    valid_from  TIMESTAMPTZ NOT NULL,   -- when this snapshot was read
    scheduler   VARCHAR NOT NULL,       -- slurm | kueue | kai | volcano | kubernetes | simulator
    scope       VARCHAR NOT NULL,       -- cluster | partition | qos | cluster_queue | queue | tier
    subject     VARCHAR NOT NULL,       -- '' for the cluster, else the partition, QOS, queue or tier
    setting     VARCHAR NOT NULL,
    value       VARCHAR NOT NULL,
    raw         VARCHAR,                -- e.g. "PreemptExemptTime=00:01:00"
    source      VARCHAR NOT NULL,
    _load_id    VARCHAR NOT NULL,
    PRIMARY KEY (cluster, valid_from, scope, subject, setting)
);
