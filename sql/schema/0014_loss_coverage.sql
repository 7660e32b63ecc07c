-- Scorecard Q3 reads its loss to gain from measured losses only, when at least analytics.loss_coverage_min of the
-- preemptions with a known gain have one (sql/views/readiness_evidence.sql).
ALTER TABLE analytics_params ADD COLUMN loss_coverage_min DOUBLE;
