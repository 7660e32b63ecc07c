-- The intervals of the headline's per-tier figures (issue 31, item 5; analytics/whatif/counterfactual.py,
-- tier_intervals; docs/figures.md "What a counterfactual's interval covers"): made as the net's, the bootstrap
-- over blocks of jobs combined with the jittered replays. Stored on the rows of the scenario the headline weighs
-- ('today', or 'on' where the cluster does not preempt); waiting_gpu_h_low/high also on scenario 'none' (queue
-- GPU-hours without preemption). NULL where an interval cannot be made (no job affected, or too few blocks hold
-- the affected jobs) and on every other scenario's rows.
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS affected_jobs_low DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS affected_jobs_high DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS extra_wait_mean_low_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS extra_wait_mean_high_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS extra_wait_p50_low_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS extra_wait_p50_high_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS waiting_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS waiting_gpu_h_high DOUBLE;
-- A counterfactual stored before lacks them: forgetting its fingerprint makes the next `analyze` replay it.
UPDATE counterfactual_runs SET fingerprint = '';
