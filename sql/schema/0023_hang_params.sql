-- When a silent run is a hang (sql/views/run_ends.sql): analytics.hang_min_s and analytics.hang_gap_factor.
ALTER TABLE analytics_params ADD COLUMN hang_min_s DOUBLE;
ALTER TABLE analytics_params ADD COLUMN hang_gap_factor DOUBLE;
