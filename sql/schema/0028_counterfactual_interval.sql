-- What a counterfactual net's interval covers, and the sweeps whose net is not monotone (issue 31, item 5;
-- analytics/whatif/counterfactual.py, docs/figures.md "What a counterfactual's interval covers").
-- interval_covers: one sentence: the confidence, the blocks the bootstrap resamples (submission days; in a window
--   under a week its stretches, or its jobs) and the jittered replays it combines; NULL in rows written before.
-- sweeps: JSON object, sweep ('trigger', 'victim_order') -> the sentence that says it is not monotone and why;
--   '{}' when every sweep is monotone.
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS interval_covers VARCHAR;
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS sweeps VARCHAR;
