"""The preemption hazard by run age (sql/views/preemption_hazard.sql) against truths the tests control.

- Simulated: runs whose preemption age is drawn from a known piecewise-constant hazard (1.5 an hour in the first
  hour, 0.4 an hour to 4 h, 0.05 an hour after), each also ending on its own at a uniformly drawn age (censoring,
  as runs that complete or fail do), and some still running at the data's end. The estimate must hold the true
  hazard of each band inside its interval.
- Recorded: the lifetimes of AWS V100 spot instances in a public preemption recording
  (tests/cases/hazard/, skypilot-org/spot-traces, named in the file), loaded as runs; the view must agree with
  a life table computed here from the same lifetimes, and show what the recording shows: the hazard falls
  sharply with age.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from analytics_scenario import Scenario

CASES = Path(__file__).resolve().parents[1] / "cases" / "hazard"
H = 3600.0
# (from, to, preemptions per hour)
TRUTH = ((0.0, 1 * H, 1.5), (1 * H, 4 * H, 0.4), (4 * H, float("inf"), 0.05))


def _true_rate(age_s: float) -> float:
    return next(rate for lo, hi, rate in TRUTH if lo <= age_s < hi)


def _draw_preemption_age(rng: random.Random) -> float:
    """Inverse transform through the piecewise-constant hazard."""
    target = rng.expovariate(1.0)  # the cumulative hazard at which the run is preempted
    for lo, hi, rate in TRUTH:
        width_h = (hi - lo) / H
        if target <= rate * width_h:
            return lo + target / rate * H
        target -= rate * width_h
    raise AssertionError("the last band is open")


def _load_runs(sc: Scenario, runs: list[tuple[float, str]], data_end: float, team: str = "t") -> None:
    """Runs as (age at its end, state); a state of 'running' has no end and runs to the data's end."""
    sc.pool("p", 10_000)
    start = 0.0
    for k, (age, state) in enumerate(runs):
        job = f"j{k}"
        begin = data_end - age if state == "running" else start
        sc.job(job, "low", 1, "p", begin, team=team)
        sc.run(job, 1, 1, "p", begin, None if state == "running" else begin + age, state, submit=begin)
        start += 7.0
    # a job that ends at the data's end fixes where "still running" stops
    sc.job("last", "high", 1, "p", data_end - 1, team="other")
    sc.run("last", 1, 1, "p", data_end - 1, data_end, "completed", submit=data_end - 1)


def _rows(sc: Scenario, level: str, **where: str) -> list[dict]:
    rows = sc.wh.query("SELECT * FROM preemption_hazard WHERE level = $l ORDER BY band", {"l": level}).to_dicts()
    return [r for r in rows if all(r[k] == v for k, v in where.items())]


def test_the_hazard_of_a_known_shape_is_recovered_with_censoring(sc: Scenario) -> None:
    rng = random.Random(31)
    runs: list[tuple[float, str]] = []
    for _ in range(2000):
        preempted_at = _draw_preemption_age(rng)
        ends_at = rng.uniform(0, 24 * H)  # completes, fails or is cancelled on its own
        if preempted_at < ends_at:
            runs.append((preempted_at, "preempted"))
        else:
            runs.append((ends_at, "completed"))
    for _ in range(400):  # started late: still running at the data's end unless preempted first
        preempted_at, age_then = _draw_preemption_age(rng), rng.uniform(0, 6 * H)
        runs.append((preempted_at, "preempted") if preempted_at < age_then else (age_then, "running"))
    data_end = 30 * 86400.0
    _load_runs(sc, runs, data_end)
    sc.analyze()
    rows = _rows(sc, "team", team="t")
    assert [r["band"] for r in rows][:5] == [0, 1, 2, 3, 4]
    assert rows[0]["runs_at_risk"] == len(runs)
    assert sum(r["preemptions"] for r in rows) == sum(1 for _, s in runs if s == "preempted")
    assert sum(r["censored"] for r in rows) == sum(1 for _, s in runs if s != "preempted")
    checked = 0
    for r in rows:
        if r["preemptions"] < 10:
            continue
        truth = _true_rate(r["age_from_s"])
        d, h = r["preemptions"], r["hazard_per_h"]
        assert (r["hazard_low_per_h"], r["hazard_high_per_h"]) == pytest.approx(
            (h * math.exp(-1.96 / math.sqrt(d)), h * math.exp(1.96 / math.sqrt(d))))
        # the truth inside the 99.9% interval: one band in twenty may miss the 95% one, none this one
        assert h * math.exp(-3.29 / math.sqrt(d)) <= truth <= h * math.exp(3.29 / math.sqrt(d)), r
        checked += 1
    assert checked >= 4
    # exposure: every run's age is spent once across the bands
    assert sum(r["exposure_h"] for r in rows) == pytest.approx(sum(a for a, _ in runs) / H, rel=1e-9)
    # the first hour is almost four times as dangerous as the next three, thirty times the time after 4 h
    first = rows[1]["hazard_per_h"]
    late = next(r for r in rows if r["age_from_s"] == 4 * H)["hazard_per_h"]
    assert first > 2.5 * rows[3]["hazard_per_h"] and first > 10 * late


def test_unknown_is_not_zero_and_no_preemption_reads_as_an_upper_bound(sc: Scenario) -> None:
    _load_runs(sc, [(600.0, "completed"), (1200.0, "completed")], 86400.0)
    sc.analyze()
    rows = _rows(sc, "team", team="t")
    assert [r["band"] for r in rows] == [0, 1]  # no run reached an hour: no band after
    first = rows[0]
    assert first["preemptions"] == 0 and first["hazard_per_h"] == 0.0 and first["hazard_low_per_h"] == 0.0
    assert first["hazard_high_per_h"] == pytest.approx(3.0 / first["exposure_h"])


def _recorded() -> tuple[dict, list[tuple[float, str]]]:
    case = json.loads((CASES / "skypilot_spot_v100_aws_2023-04-22.json").read_text())
    gap = case["gap_seconds"]
    runs = []
    for zone in case["zones"].values():
        runs += [(n * gap, "preempted") for n in zone["preempted_ticks"]]
        runs += [(n * gap, "running") for n in zone["censored_ticks"]]
    return case, runs


def test_a_public_preemption_recording_falls_with_age(sc: Scenario) -> None:
    case, runs = _recorded()
    assert case["source"]["repository"] == "skypilot-org/spot-traces"
    data_end = 10 * 86400.0
    _load_runs(sc, runs, data_end)
    sc.analyze()
    rows = _rows(sc, "team", team="t")
    # the view's life table against one computed here from the same lifetimes
    for r in rows:
        lo, hi = r["age_from_s"], r["age_to_s"] if r["age_to_s"] is not None else float("inf")
        exposure = sum(max(0.0, min(age, hi) - lo) for age, _ in runs if age >= lo) / H
        events = sum(1 for age, s in runs if s == "preempted" and lo <= age < hi)
        assert r["preemptions"] == events
        assert r["exposure_h"] == pytest.approx(exposure)
    by_from = {r["age_from_s"]: r for r in rows}
    first_hour = (by_from[0.0]["preemptions"] + by_from[900.0]["preemptions"]) / (
        by_from[0.0]["exposure_h"] + by_from[900.0]["exposure_h"])
    after_4h = sum(r["preemptions"] for r in rows if r["age_from_s"] >= 4 * H) / sum(
        r["exposure_h"] for r in rows if r["age_from_s"] >= 4 * H)
    # what the recording shows: in its first hour an instance is preempted several times as often as after 4 h
    assert first_hour > 4 * after_4h
    assert by_from[900.0]["hazard_low_per_h"] > by_from[4 * H]["hazard_high_per_h"]
