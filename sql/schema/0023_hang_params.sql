-- When a silent run is a hang (sql/views/run_ends.sql): analytics.hang_min_s and analytics.hang_gap_factor. IF NOT
-- EXISTS: an `analyze` of a build that had the settings before this migration rewrote the table with them.
ALTER TABLE analytics_params ADD COLUMN IF NOT EXISTS hang_min_s DOUBLE;
ALTER TABLE analytics_params ADD COLUMN IF NOT EXISTS hang_gap_factor DOUBLE;
