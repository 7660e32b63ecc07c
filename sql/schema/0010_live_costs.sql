-- The expected requeue wait (sql/views/expected_requeue.sql) reads its window from analytics.requeue_window_s.
ALTER TABLE analytics_params ADD COLUMN requeue_window_s DOUBLE;
