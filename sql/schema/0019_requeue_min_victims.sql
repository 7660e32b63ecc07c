-- The expected requeue wait (sql/views/expected_requeue.sql) falls back to a wider group of victims when its own
-- holds fewer than analytics.requeue_min_victims.
ALTER TABLE analytics_params ADD COLUMN requeue_min_victims INTEGER;
