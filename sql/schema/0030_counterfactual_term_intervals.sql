-- Every counterfactual figure with its interval (issue 31, item 5; analytics/whatif/counterfactual.py,
-- term_intervals and figure_intervals; docs/figures.md "What a counterfactual's interval covers"), made as the
-- net's: the bootstrap over blocks of jobs combined with the jittered replays.
-- The headline's three terms: critical+high queue time saved, work thrown away, lower-tier queue time added.
-- NULL where the bootstrap had no job to resample.
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS high_wait_saved_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS high_wait_saved_gpu_h_high DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS thrown_away_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS thrown_away_gpu_h_high DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS lower_wait_added_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS lower_wait_added_gpu_h_high DOUBLE;
-- Each scenario's per-tier figures (0029 gave intervals to the headline scenario's changes and queue GPU-hours
-- only; they are now made on every scenario's rows): NULL where no job of the tier gives the figure, or where
-- more replicates than one tail of the interval do not define it.
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS wait_p50_low_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS wait_p50_high_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS wait_p90_low_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS wait_p90_high_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS completion_p50_low_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS completion_p50_high_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS thrown_away_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS thrown_away_gpu_h_high DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS victim_waiting_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS victim_waiting_gpu_h_high DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS late_waiting_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS late_waiting_gpu_h_high DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS busy_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS busy_gpu_h_high DOUBLE;
-- A counterfactual stored before lacks them: forgetting its fingerprint makes the next `analyze` replay it.
UPDATE counterfactual_runs SET fingerprint = '';
