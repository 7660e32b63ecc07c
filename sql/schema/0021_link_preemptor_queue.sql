-- Where a Kueue preemptor was, as the victim's Preempted event says it (Kueue 0.15 on: "preemptor path:
-- /<cohort>/.../<ClusterQueue>"): `preemptor_queue` its ClusterQueue, `preemptor_cohort` the cohort path above
-- it (NULL for a ClusterQueue in no cohort), known even when the preemptor Workload is gone and never collected
-- (kubernetes-sigs/kueue#11079). Kueue 0.17 on adds each side's effective priority (base + boost) to the event:
-- `preemptor_priority`, `victim_priority`. NULL where the message does not say (older releases, other sources).
ALTER TABLE preemption_links ADD COLUMN preemptor_queue VARCHAR;
ALTER TABLE preemption_links ADD COLUMN preemptor_cohort VARCHAR;
ALTER TABLE preemption_links ADD COLUMN preemptor_priority BIGINT;
ALTER TABLE preemption_links ADD COLUMN victim_priority BIGINT;
