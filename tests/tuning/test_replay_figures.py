"""How the replay reports: errors relative to the real figure, effects with digits, no per-week figure from
minutes, an interval from jittered inputs, the policy it read or inferred with every value."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sim_cluster import CHURN, Clusters, default_settings

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import PoolSpec, SimConfig, simulate_into
from preemptlens.analytics.simulator.model import PolicyConfig, WorkloadConfig
from preemptlens.analytics.whatif.replay import (
    Figures,
    Validation,
    Variant,
    Window,
    Workload,
    interval,
    jittered,
    load_workload,
)
from preemptlens.reading.words import DURATION, before_after, significant
from preemptlens.warehouse import Warehouse

ELEVEN_MINUTES = 11 * 60 / (7 * 86400)


def _figures(**given: float) -> Figures:
    base = {"preemptions": 16, "lost_gpu_h": 0.02, "high_wait_median_s": 1.0, "victim_jobs": 12,
            "weeks": ELEVEN_MINUTES}
    return Figures(**{**base, **given})  # type: ignore[arg-type]


def test_a_wait_error_is_relative_to_the_real_wait() -> None:
    # 5.5 s replayed for 1.0 s real is a 450% miss, not 1.5% of some scale.
    errors = Validation(_figures(), _figures(high_wait_median_s=5.5), 0.1).errors
    assert errors["high_wait_median_s"] == pytest.approx(4.5)
    # Below a second no miss is measurable (sacct's whole seconds).
    assert Validation(_figures(high_wait_median_s=0.0), _figures(high_wait_median_s=0.4), 0.1).errors[
        "high_wait_median_s"] == pytest.approx(0.4)
    assert errors["victims"] == 0.0


def test_effects_keep_the_digits_that_show_their_size() -> None:
    assert before_after(0.0205, 0.0186) == "0.02050 -> 0.01860 (-0.00190)"
    assert before_after(478.4, 459.5) == "478.4 -> 459.5 (-18.9)"
    assert before_after(0.0, 0.0) == "unchanged at 0"
    # no negative zero, and a change that is not 0 does not read as one (issue 31.5)
    assert before_after(1e-9, 0.0) == "0.000000001 -> 0.000000 (-0.000000001)"
    # A wait reads as a duration, and a wait the change does not move says so (not "0 -> 0 (0) s").
    assert before_after(720.0, 480.0, DURATION) == "12 min -> 8 min (-4 min)"
    assert before_after(0.0, 0.0, DURATION) == "unchanged at 0 s"
    assert significant(0.0204756) == "0.0205" and significant(12307.0) == "12,307"


def test_no_figure_per_week_from_eleven_minutes() -> None:
    figures = _figures()
    assert figures.victims_per_week is None and figures.preemptions_per_week is None
    assert figures.per_week_note == "the window of 11 min is too short to extrapolate to a week"
    assert _figures(weeks=1.0).victims_per_week == 12


def _workload(resolution: float, latency_range: tuple[float, float] | None) -> Workload:
    from preemptlens.analytics.simulator.model import JobSpec
    from preemptlens.analytics.whatif.policy_in_force import PolicyBasis

    jobs = tuple(JobSpec(f"j{i}", "low", True, "gpu", 4, 10.0 * i + resolution / 2, 300.0, startup_s=3.0,
                         warmup_s=4.0, checkpoint_interval_s=30.0) for i in range(6))
    jobs += (JobSpec("h", "high", False, "gpu", 8, 95.5, 60.0),)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    policy = PolicyConfig(min_run_s=0.0, grace_s=0.0, requeue_hold_s=11.0, scheduler="slurm", queue_order="submit",
                          latency_s=1.0)
    return Workload(Window("c", start, start + timedelta(hours=1)), (PoolSpec("gpu", 1, 8),), jobs,
                    PolicyBasis(policy, {}, latency_range=latency_range), {}, (), resolution_s=resolution)


def test_the_interval_jitters_inputs_within_their_error_and_the_event_order() -> None:
    uncertain = _workload(1.0, (0.5, 1.5))
    jobs, policy = jittered(uncertain, uncertain.actual.policy, 3)
    for drawn, given in zip(jobs, uncertain.jobs, strict=True):
        # A whole-second submission anywhere in its second; start-up and warm-up within half a second.
        assert abs(drawn.submit_s - given.submit_s) <= 0.5
        assert abs(drawn.startup_s - given.startup_s) <= 0.5 and abs(drawn.warmup_s - given.warmup_s) <= 0.5
    assert 0.5 <= policy.latency_s <= 1.5
    spread = interval(uncertain, Variant("a", uncertain.actual.policy), 6, processes=1)
    assert spread is not None and spread.draws == 6
    low, high = spread.of("lost_gpu_h")
    assert low is not None and high is not None and low < high
    # Exact inputs are still replayed with the order of simultaneous events shuffled; with no ties here (every
    # job submitted at its own time), every draw is the same.
    exact = _workload(0.0, None)
    point = interval(exact, Variant("a", exact.actual.policy), 6, processes=1)
    assert point is not None and point.draws == 6 and point.of("lost_gpu_h")[0] == point.of("lost_gpu_h")[1]
    assert "the same over 6 replays" in point.shown("lost_gpu_h")


def test_a_simulated_cluster_states_its_policy_and_the_replay_runs_it(tmp_path: Path) -> None:
    policy = PolicyConfig(min_run_s=300.0, grace_s=30.0, requeue_hold_s=60.0, queue_order="submit")
    sim = SimConfig(cluster="stated", days=1.0, pools=(PoolSpec("gpu", nodes=4),), policy=policy,
                    workload=replace(WorkloadConfig(seed=5), load=1.2, high_share=0.3))
    with Warehouse(tmp_path / "w.duckdb") as wh:
        simulate_into(wh, sim)
        analyze(wh, AnalyticsSettings())
        workload = load_workload(wh, Window("stated", sim.start, sim.start + timedelta(days=1)), default_settings())
    actual = workload.actual
    assert (actual.policy.min_run_s, actual.policy.grace_s, actual.policy.requeue_hold_s) == (300.0, 30.0, 60.0)
    assert actual.policy.queue_order == "submit"
    assert actual.kind("min_run_s") == "simulator" and actual.stated_by == "simulator"
    assert "min_run_s 300 s (simulator: its own setting)" in actual.describe()


def test_inferred_values_are_printed_and_exemption_is_no_grace_time(clusters: Clusters) -> None:
    # A minimum run time makes preemptors wait; their waits must not be read as a grace time.
    wh, window = clusters.get("exempt_no_grace", **CHURN, policy={"min_run_s": 600, "grace_s": 0,
                                                                  "requeue_hold_s": 120})
    actual = load_workload(wh, window, default_settings()).actual
    assert actual.policy.grace_s == 0 and actual.policy.min_run_s == 600
    text = actual.describe()
    assert "grace_s 0 s (inferred 0 s:" in text and "min_run_s 600 s (inferred:" in text
