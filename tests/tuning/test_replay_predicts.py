"""Ground truth for the what-if: one seed simulated twice, under the policy in force and under the changed one;
the replay of the first run's warehouse under the changed policy is compared with the second run's truth.

The simulator follows the same scheduler model as the replay (here Slurm's and Kueue's victim choice, with
queue order by submission and a scheduling latency), and states its policy in `scheduler_policy`; the replay
reads only the warehouse.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sim_cluster import CHURN, default_settings, sim_config

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import simulate_into
from preemptlens.analytics.whatif.replay import (
    Figures,
    Validation,
    Variant,
    Window,
    load_workload,
    observed_figures,
    run_variant,
)
from preemptlens.warehouse import Warehouse


def _run(path: Path, sim: object) -> tuple[Warehouse, Window]:
    wh = Warehouse(path)
    simulate_into(wh, sim)  # type: ignore[arg-type]
    analyze(wh, AnalyticsSettings())
    start = sim.start  # type: ignore[attr-defined]
    return wh, Window(sim.cluster, start, start + timedelta(seconds=sim.horizon_s))  # type: ignore[attr-defined]


@pytest.mark.parametrize("scheduler", ["slurm", "kueue"])
def test_the_replay_of_one_run_predicts_the_other_policys_run(tmp_path: Path, scheduler: str) -> None:
    # What the first run cannot show (the warm-up and save time of a job it never preempted) is the same for
    # every job, so the prediction is tested and not the luck of a guess; start-ups differ and are measured.
    base = sim_config(**{**CHURN, "checkpoint_share": 0.8, "warmup_s_range": (600.0, 600.0),
                         "final_checkpoint_share": 1.0, "save_s_range": (30.0, 30.0),
                         "startup_s_range": (30.0, 120.0)},
                      policy={"min_run_s": 0.0, "grace_s": 30.0, "requeue_hold_s": 60.0, "scheduler": scheduler,
                              "queue_order": "submit", "latency_s": 2.0})
    changed = replace(base, policy=replace(base.policy, min_run_s=1800.0))
    wh_a, window = _run(tmp_path / "a.duckdb", base)
    wh_b, window_b = _run(tmp_path / "b.duckdb", changed)
    try:
        workload = load_workload(wh_a, window, default_settings())
        assert workload.actual.policy.scheduler == scheduler and workload.actual.kind("min_run_s") == "simulator"
        assert workload.actual.policy.latency_s == 2.0
        assert any(j.startup_s > 0 for j in workload.jobs)
        real_a, real_b = observed_figures(wh_a, window), observed_figures(wh_b, window_b)
        assert real_a.preemptions > 30 and real_b.preemptions < real_a.preemptions
        # The replay under the policy in force reproduces its own run,
        replayed_a = run_variant(workload, Variant("a", workload.actual.policy))
        assert Validation(real_a, replayed_a, 0.10).ok, Validation(real_a, replayed_a, 0.10).describe()
        # and under the changed policy, the other run.
        predicted = run_variant(workload, Variant("b", replace(workload.actual.policy, min_run_s=1800.0)))
        # (held to the window-wide figures, as before the validation grew per-tier checks: a changed policy moves
        # the lower tiers' short waits by a minute or two, which the validation of the run itself counts)
        check = Validation(real_b, predicted, 0.10)
        assert all(e is None or e <= 0.10 for e in check.errors.values()), check.describe()
        _same_truth(wh_b, real_b)
    finally:
        wh_a.close()
        wh_b.close()


def _same_truth(wh: Warehouse, figures: Figures) -> None:
    truth = wh.query("select count(*) as n, sum(lost_gpu_s) / 3600 as lost from sim_truth_preemptions").row(0)
    assert figures.preemptions == truth[0] and figures.lost_gpu_h == pytest.approx(truth[1])
