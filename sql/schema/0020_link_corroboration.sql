-- What bore out a preemption link reported by a Kubernetes Event (issue 33: an Event's writer fields are the
-- writer's own word). `corroboration`: the victim's state, which only the scheduler writes, that the collector
-- read back (e.g. "pod condition DisruptionTarget (PreemptionByScheduler)"); NULL when the victim could not be
-- read any more (deleted, replaced) or writes nothing (KAI before v0.17.0), and for every other source.
-- `victim_kind`: pod, workload or podgroup for a link from an Event, NULL for the other sources (a scheduler's
-- log, files), whose links are believed as before. An Event its victim gainsays is quarantined, never loaded.
-- `victim_started`: when the evicted attempt began, where that state says it (a KAI PodGroup's
-- kai.scheduler/last-start-timestamp, not after the eviction): the start of a PodGroup's eviction whose pods
-- were never seen (stg_job_runs).
ALTER TABLE preemption_links ADD COLUMN corroboration VARCHAR;
ALTER TABLE preemption_links ADD COLUMN victim_kind VARCHAR;
ALTER TABLE preemption_links ADD COLUMN victim_started TIMESTAMPTZ;
