-- The expected requeue wait (sql/views/expected_requeue.sql) falls back to a wider group of victims when its own
-- holds fewer than analytics.requeue_min_victims.
ALTER TABLE analytics_params ADD COLUMN IF NOT EXISTS requeue_min_victims INTEGER;

-- The live cost says which group of victims its expected requeue wait came from, and whether that wait is a lower
-- bound (fewer than half of them restarted within the longest wait seen, which stands in for the median).
ALTER TABLE live_costs ADD COLUMN requeue_basis VARCHAR;
ALTER TABLE live_costs ADD COLUMN requeue_at_least BOOLEAN;
