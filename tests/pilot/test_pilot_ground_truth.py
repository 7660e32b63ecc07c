"""Pilot verdicts and intervals against the simulator's ground truth (the same seed without the change)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pilot_scenario import BUSIER_MONTH, HARMFUL, HELPFUL, evaluate_both, true_effect

from preemptlens.analytics.pilot import PilotSettings, evaluate
from preemptlens.warehouse import Warehouse

TH = PilotSettings()


def inside(ev_key: str, actual, counterfactual) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    f = actual.figure(ev_key)
    truth = true_effect(actual, counterfactual, ev_key)
    assert f.low is not None and f.high is not None, f.missing
    assert f.low <= truth <= f.high, (ev_key, truth, f.low, f.high)
    return truth, f.low, f.high


def test_helpful_pilot_is_widened_with_the_true_effect_inside_its_intervals(helpful_warehouse: Path) -> None:
    with Warehouse(helpful_warehouse) as wh:
        actual, counterfactual = evaluate_both(wh, HELPFUL, TH)
    assert actual.verdict == "widen", actual.reasons
    # The time-sensitive work gained: its true median and p90 wait fell, and both intervals say so.
    for key in ("high_wait_p50_s", "high_wait_p90_s"):
        truth, _, high = inside(key, actual, counterfactual)
        assert truth < 0 and high < 0
    for key in ("retries_per_job", "thrown_away_share", "completion_p50_s_normal", "completion_p50_s_low",
                "completion_p50_s_all", "net_benefit_share"):
        inside(key, actual, counterfactual)
    # The control pools are the same in both runs: the change touched only the pilot pools.
    for f, g in zip(actual.figures, counterfactual.figures, strict=True):
        assert (f.control_before, f.control_after) == (g.control_before, g.control_after), f.key
    # Before the change and in the control pools preemption was off: nobody was a victim.
    victims = actual.figure("victims_per_week")
    assert victims.pilot_before == victims.control_before == victims.control_after == 0
    assert victims.pilot_after is not None and victims.pilot_after > 0
    assert actual.figure("retries_per_job").n[1] > 1000


def test_harmful_pilot_is_rolled_back(harmful_warehouse: Path) -> None:
    with Warehouse(harmful_warehouse) as wh:
        actual, counterfactual = evaluate_both(wh, HARMFUL, TH)
    assert actual.verdict == "roll back", actual.reasons
    assert actual.clear_loss
    assert any(r.startswith("costs clearly exceed gains") for r in actual.reasons)
    # Victims without checkpoints lose whole runs: the work thrown away rose past its limit, truly and clearly.
    truth, low, _ = inside("thrown_away_share", actual, counterfactual)
    assert truth > TH.max_thrown_away_increase_share and low > TH.max_thrown_away_increase_share
    for key in ("net_benefit_share", "retries_per_job", "high_wait_p90_s", "completion_p50_s_all"):
        inside(key, actual, counterfactual)


def test_a_busier_month_is_absorbed_by_the_control_pools(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        BUSIER_MONTH.load_into(wh, replays=False)
        actual, counterfactual = evaluate_both(wh, BUSIER_MONTH, TH)
    for key in ("high_wait_p50_s", "high_wait_p90_s", "completion_p50_s_all"):
        f = actual.figure(key)
        # The change did nothing, yet the pilot pools' own before-and-after comparison shows waits rising a lot ...
        assert true_effect(actual, counterfactual, key) == 0
        assert f.pilot_before is not None and f.pilot_after is not None
        # ... which the control pools, as busy as they, take out: the interval holds the true effect, zero.
        assert f.low is not None and f.high is not None and f.low <= 0 <= f.high, (key, f.low, f.high)
    wait = actual.figure("high_wait_p50_s")
    naive = wait.pilot_after - wait.pilot_before  # type: ignore[operator]
    assert naive > 300, naive
    assert actual.verdict == "keep piloting", actual.reasons


def test_too_little_data_keeps_piloting_and_says_how_long(helpful_warehouse: Path) -> None:
    pilot = HELPFUL.pilot()
    with Warehouse(helpful_warehouse) as wh:
        early = evaluate(wh.query, pilot, TH, now=pilot.start + timedelta(days=3))
    assert early.days_after == 3
    assert early.verdict == "keep piloting"
    assert early.more_weeks == pytest.approx((TH.min_days_after - 3) / 7)
    # The same pilot with all its data is widened (test above): only the amount of data differs.
