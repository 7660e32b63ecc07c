-- The replay's validation on the figures that decide the net (analytics/whatif/replay.py, Validation.checks):
-- per tier the first-start wait's median and p90, queue GPU-hours, work thrown away and jobs completed, and
-- window-wide preemptions, victims, lost GPU-hours and work thrown away, each the record against the replay
-- under the policy in force with its floor and whether it differs between the policies replayed.
-- validation: JSON {"tolerance": t, "checks": [{figure, tier, observed, replayed, floor, error, decides}]};
-- reproduces now means every check that decides is within the tolerance.
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS validation VARCHAR;
-- Stored counterfactuals were validated on the old figures: an empty fingerprint replays them again.
UPDATE counterfactual_runs SET fingerprint = '';
