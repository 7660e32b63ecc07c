-- The counterfactual drains (analytics/whatif/counterfactual.py, run_scenario): the jobs submitted in the window
-- are replayed to completion with no arrivals after its end, so no figure is cut at the window's end, and the
-- headline reads waiting per job and against the window's capacity (docs/figures.md, section 10).
-- capacity_gpu_h: the window's capacity, the pools' GPUs x the window's hours.
ALTER TABLE counterfactual_runs ADD COLUMN IF NOT EXISTS capacity_gpu_h DOUBLE;
-- late_waiting_gpu_h: of waiting_gpu_h, the queue time after the window's end (a window alone censors it).
-- undrained_jobs: jobs with a run that never started by the end of the drained replay (none fit): out of
-- waiting_gpu_h and of the net.
-- affected_jobs, extra_wait_mean_s, extra_wait_p50_s: against no preemption, the jobs whose queue time changed
-- by a second or more, and their extra queue time per job (negative: they waited less); NULL where none changed.
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS late_waiting_gpu_h DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS undrained_jobs BIGINT;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS affected_jobs BIGINT;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS extra_wait_mean_s DOUBLE;
ALTER TABLE counterfactual_figures ADD COLUMN IF NOT EXISTS extra_wait_p50_s DOUBLE;
-- A counterfactual stored before it drained was cut at the window's end and lacks these columns: forgetting its
-- fingerprint makes the next `analyze` replay it (counterfactual.refresh replays on a changed fingerprint).
UPDATE counterfactual_runs SET fingerprint = '';
