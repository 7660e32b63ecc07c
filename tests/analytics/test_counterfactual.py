"""The counterfactual headline against the simulator's ground truth: the same seed simulated twice.

The cluster is simulated with preemption on and analysed; its counterfactual replays the recorded window without
preemption and with a trigger threshold. The same seed is then simulated under each of those policies, and its
true per-tier figures (computed from the simulator's own outcome by the same function) must agree with the
replay's within 10% on every figure; a small figure is compared against a floor instead (waits against 5 minutes,
GPU-hours against 1% of the cluster's busy GPU-hours), since a relative error of a handful of GPU-hours says
nothing. Then the headline's sentence, the break-even factor and the net's sign are checked by hand from the
stored rows.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest
from analytics_scenario import simulated_and_analysed

from preemptlens.analytics.simulator import SimConfig, WorkloadConfig, cluster_of, simulate
from preemptlens.analytics.whatif import counterfactual, scorecard
from preemptlens.contract import TIERS
from preemptlens.reading import words

SIM = SimConfig(cluster="gt", start=datetime(2026, 3, 2, tzinfo=UTC), days=4.0, pools=cluster_of(64),
                workload=WorkloadConfig(seed=1, load=0.85), sample_step_s=300)
FIGURES = ("wait_p50_s", "wait_p90_s", "completion_p50_s", "thrown_away_gpu_h", "victim_waiting_gpu_h",
           "waiting_gpu_h", "busy_gpu_h")
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[counterfactual.Answer]:
    with simulated_and_analysed(tmp_path_factory.mktemp("cf") / "w.duckdb", SIM) as wh:
        yield counterfactual.read(wh)["gt"]


def truth(policy_change: dict[str, object]) -> dict[str, counterfactual.TierFigures]:
    sim = simulate(dataclasses.replace(SIM, policy=dataclasses.replace(SIM.policy, **policy_change)))
    return {f.tier: f for f in counterfactual.tier_figures(counterfactual.job_table(sim.outcome))}


@pytest.mark.parametrize(("scenario", "change"), [
    ("none", {"enabled": False}),
    ("today", {}),
    ("trigger_900", {"trigger_wait_s": 900.0}),
])
def test_replayed_counterfactual_matches_the_second_run_of_the_same_seed(
    stored: counterfactual.Answer, scenario: str, change: dict[str, object]
) -> None:
    true = truth(change)
    busy = true["all"].busy_gpu_h
    compared = 0
    for tier in (*TIERS, "all"):
        row = stored.figure(scenario, tier)
        assert row is not None, (scenario, tier)
        for name in FIGURES:
            replayed, real = row[name], getattr(true[tier], name)
            if real is None:
                assert replayed is None, (scenario, tier, name, replayed)
                continue
            floor = 300.0 if name.endswith("_s") else 0.01 * busy
            assert abs(replayed - real) <= TOLERANCE * max(abs(real), floor), (scenario, tier, name, replayed, real)
            compared += 1
    assert compared >= 30
    # the replay under today's policy reproduces the recorded window, which is what makes the others credible
    assert stored.run["reproduces"]


def test_no_preemption_replays_no_preemption(stored: counterfactual.Answer) -> None:
    none = stored.scenario("none")
    assert none is not None and none["preemptions"] == 0 and json.loads(none["policy"])["enabled"] is False
    for tier in TIERS:
        row = stored.figure("none", tier)
        assert row is not None and row["thrown_away_gpu_h"] == 0 and row["victim_waiting_gpu_h"] == 0
    today = stored.scenario("today")
    assert today is not None and today["preemptions"] > 0


def test_headline_and_break_even_by_hand(stored: counterfactual.Answer) -> None:
    run = stored.run
    weights = json.loads(run["tier_weights"])

    def fig(scenario: str, tier: str, name: str) -> float:
        row = stored.figure(scenario, tier)
        assert row is not None
        return float(row[name])

    saved = sum(fig("none", t, "waiting_gpu_h") - fig("today", t, "waiting_gpu_h") for t in ("critical", "high"))
    added = sum(fig("today", t, "waiting_gpu_h") - fig("none", t, "waiting_gpu_h") for t in ("normal", "low"))
    thrown = fig("today", "all", "thrown_away_gpu_h")
    assert run["high_wait_saved_gpu_h"] == pytest.approx(saved)
    assert run["lower_wait_added_gpu_h"] == pytest.approx(added)
    assert run["thrown_away_gpu_h"] == pytest.approx(thrown)
    # the net weighs each tier's queue time saved less its work thrown away
    net = sum(weights[t] * (fig("none", t, "waiting_gpu_h") - fig("today", t, "waiting_gpu_h")
                            - fig("today", t, "thrown_away_gpu_h")) for t in TIERS)
    assert run["net_value"] == pytest.approx(net)
    assert run["net_low"] <= run["net_value"] <= run["net_high"]
    # break-even: scaling the critical and high weights by the factor makes the net zero
    upper = sum(weights[t] * (fig("none", t, "waiting_gpu_h") - fig("today", t, "waiting_gpu_h")
                              - fig("today", t, "thrown_away_gpu_h")) for t in ("critical", "high"))
    # the kind follows from the two parts (with reservations this seed's normal and low tiers lose nothing on
    # balance: test_break_even_kinds covers the others)
    rest = net - upper
    kind = "never" if upper <= 0 else "always" if rest >= 0 else "factor"
    assert run["breakeven"] == kind
    if kind == "factor":
        assert run["breakeven_factor"] * upper + rest == pytest.approx(0.0, abs=1e-6 * abs(net) + 1e-6)
        assert f"{run['breakeven_factor']:,.2f}x" in scorecard.net_text(stored)
    else:
        assert run["breakeven_factor"] is None
    text = scorecard.headline_text(stored)
    assert saved > 0 and thrown > 0
    assert text.startswith(f"against plain queueing, preemption saved critical+high work {words.gpu_hours(saved)} "
                           f"of waiting; it cost {words.gpu_hours(thrown)} thrown away")


def _table(tiers: list[str], waiting_s: list[float], thrown_gpu_s: list[float]) -> counterfactual.JobTable:
    n = len(tiers)
    zeros = np.zeros(n)
    return counterfactual.JobTable(
        tier=np.array([TIERS.index(t) for t in tiers]), gpus=np.ones(n), day=zeros, first_wait_s=zeros,
        completion_s=zeros, waiting_s=np.array(waiting_s, dtype=float),
        thrown_gpu_s=np.array(thrown_gpu_s, dtype=float),
        victim_waiting_gpu_s=zeros, busy_gpu_s=zeros, preemptions=zeros,
    )


@pytest.mark.parametrize(("today_waits", "thrown", "kind", "factor"), [
    # critical saves 100 s, low waits 100 s more and throws 100 GPU-s away: at weights 4 and 0.5, 400 against 100
    ([0.0, 200.0], [0.0, 100.0], "factor", 0.25),
    ([100.0, 100.0], [0.0, 0.0], "never", None),  # the critical job saved nothing
    ([0.0, 50.0], [0.0, 0.0], "always", None),  # the low job waited less too
])
def test_break_even_kinds(today_waits: list[float], thrown: list[float], kind: str, factor: float | None) -> None:
    tiers = ["critical", "low"]
    none = _table(tiers, [100.0, 100.0], [0.0, 0.0])
    found = counterfactual.breakeven(none, _table(tiers, today_waits, thrown), {"critical": 4.0, "high": 2.0,
                                                                                 "normal": 1.0, "low": 0.5})
    assert found.kind == kind
    assert found.factor == (None if factor is None else pytest.approx(factor))


def test_trigger_thresholds_and_the_best_alternative_are_stored(stored: counterfactual.Answer) -> None:
    triggers = [s for s in stored.scenarios if s["scenario"].startswith("trigger_")]
    assert sorted(s["trigger_wait_s"] for s in triggers) == [300.0, 900.0, 1800.0, 3600.0]
    # a trigger leaves fewer preemptors waiting long enough to preempt, the longest fewer than the shortest (not
    # strictly at every step: a preemption not made changes who waits next)
    counts = [s["preemptions"] for s in sorted(triggers, key=lambda s: s["trigger_wait_s"])]
    today = stored.scenario("today")
    assert today is not None and max(counts) <= today["preemptions"] and counts[-1] < counts[0]
    # before suggest: the action preemptlens can take on the scheduler modelled, at its defaults, in the
    # scheduler's own victim order; choosing victims by least live cost is stored only as the bound
    best = stored.scenario("best")
    assert best is not None and "run preemptlens suggest for the best change" in best["label"]
    policy = json.loads(best["policy"])
    assert policy["victim_order"] == "priority" and policy["protection"]["action"] == "kai_protect"
    assert policy["protection"]["max_jobs"] == 20 and policy["protection"]["max_pool_share"] == 0.25
    bound = stored.scenario("bound")
    assert bound is not None and json.loads(bound["policy"])["victim_order"] == "cost"
    assert bound["label"].startswith("if the scheduler could choose") and "never the fix" in bound["label"]


def test_a_window_of_one_day_still_gets_an_interval_that_can_hold_zero() -> None:
    """Over one day, resampling days made every replicate a whole multiple of the net ([0, 3 x net] whatever
    the data); the short window's stretches are resampled instead. Jobs gaining and losing in turn, a small net:
    its interval straddles zero. A week or more still resamples whole days."""
    rng = np.random.default_rng(5)
    n = 200
    per_job = np.where(np.arange(n) % 2 == 0, 10.0, -9.0) * rng.uniform(0.5, 1.5, n)
    submit = rng.uniform(0, 86_400.0, n)
    table = counterfactual.JobTable(
        tier=np.zeros(n, dtype=np.int64), gpus=np.ones(n), day=np.zeros(n, dtype=np.int64), first_wait_s=per_job,
        completion_s=per_job, waiting_s=per_job, thrown_gpu_s=per_job, victim_waiting_gpu_s=per_job,
        busy_gpu_s=per_job, preemptions=np.zeros(n), submit_s=submit,
    )
    by_day = counterfactual.bootstrap_interval(per_job, table.day, 1000, 0.9)
    assert by_day[0] is not None and by_day[0] >= 0  # the old degenerate interval: never below zero
    blocks = counterfactual.resampling_blocks(table, 86_400.0)
    assert len(np.unique(blocks)) == 24
    low, high = counterfactual.bootstrap_interval(per_job, blocks, 1000, 0.9)
    assert low is not None and high is not None and low < 0 < high
    week = counterfactual.resampling_blocks(table, 7 * 86_400.0)
    assert (week == table.day).all()


def test_a_cluster_without_preemption_is_asked_what_turning_it_on_would_do(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The same seed simulated with preemption off: its counterfactual adds "on" (its tiers' may_preempt turned
    # on), which must match the seed simulated with preemption on, and the headline weighs it against today's.
    off = dataclasses.replace(SIM, policy=dataclasses.replace(SIM.policy, enabled=False))
    with simulated_and_analysed(tmp_path_factory.mktemp("cf-off") / "w.duckdb", off) as wh:
        answer = counterfactual.read(wh)["gt"]
    assert {s["scenario"] for s in answer.scenarios} >= {"none", "today", "on"}
    true = truth({})
    busy = true["all"].busy_gpu_h
    misses = []
    for tier in (*TIERS, "all"):
        row = answer.figure("on", tier)
        assert row is not None, tier
        for name in FIGURES:
            replayed, real = row[name], getattr(true[tier], name)
            if real is None:
                continue
            floor = 300.0 if name.endswith("_s") else 0.01 * busy
            misses.append((abs(replayed - real) / max(abs(real), floor), tier, name, replayed, real))
    # A cluster that never preempted never showed its jobs' warm-up after a restart (the replay assumes none),
    # so the victims' own waiting is not compared, and the rest within 15%: the prediction is rougher than a
    # replay of preemption the record saw.
    worst = [m for m in misses if m[2] != "victim_waiting_gpu_h" and m[0] > 0.15]
    assert len(misses) >= 30 and not worst, worst
    on = next(s for s in answer.scenarios if s["scenario"] == "on")
    assert on["preemptions"] > 0
    # The headline is preemption turned on against today's plain queueing: the work it throws away is on's.
    assert answer.run["thrown_away_gpu_h"] == pytest.approx(answer.figure("on", "all")["thrown_away_gpu_h"]
                                                             - answer.figure("none", "all")["thrown_away_gpu_h"])
