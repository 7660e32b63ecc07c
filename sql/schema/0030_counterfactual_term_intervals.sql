-- The intervals of the headline's three terms (issue 31, item 5; analytics/whatif/counterfactual.py,
-- term_intervals; docs/figures.md "What a counterfactual's interval covers"): critical+high queue time saved,
-- work thrown away and lower-tier queue time added, each a sum over jobs, made as the net's (the bootstrap over
-- blocks of jobs combined with the jittered replays). NULL where the bootstrap had no job to resample.
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS high_wait_saved_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS high_wait_saved_gpu_h_high DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS thrown_away_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS thrown_away_gpu_h_high DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS lower_wait_added_gpu_h_low DOUBLE;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS lower_wait_added_gpu_h_high DOUBLE;
-- A counterfactual stored before lacks them: forgetting its fingerprint makes the next `analyze` replay it.
UPDATE counterfactual_runs SET fingerprint = '';
