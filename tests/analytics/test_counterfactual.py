"""The counterfactual headline against the simulator's ground truth: the same seed simulated twice.

The cluster is simulated with preemption on and analysed; its counterfactual replays the recorded window without
preemption and with a trigger threshold, drained (the window's jobs run to completion, no arrivals after its end).
The same seed's jobs are then simulated, drained, under each of those policies, and their
true per-tier figures (computed from the simulator's own outcome by the same function) must agree with the
replay's within 10% on every figure; a small figure is compared against a floor instead (waits against 5 minutes,
GPU-hours against 1% of the cluster's busy GPU-hours), since a relative error of a handful of GPU-hours says
nothing. Then the headline's sentence, the break-even factor and the net's sign are checked by hand from the
stored rows.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from analytics_scenario import simulated_and_analysed

from preemptlens.analytics.simulator import SimConfig, WorkloadConfig, cluster_of, simulate
from preemptlens.analytics.simulator.engine import simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec
from preemptlens.analytics.whatif import counterfactual, scorecard
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.contract import TIERS
from preemptlens.reading import words

SIM = SimConfig(cluster="gt", start=datetime(2026, 3, 2, tzinfo=UTC), days=4.0, pools=cluster_of(64),
                workload=WorkloadConfig(seed=1, load=0.85), sample_step_s=300)
FIGURES = ("wait_p50_s", "wait_p90_s", "completion_p50_s", "thrown_away_gpu_h", "victim_waiting_gpu_h",
           "waiting_gpu_h", "busy_gpu_h", "late_waiting_gpu_h")
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[counterfactual.Answer]:
    # the default jittered replays: the intervals below cover them
    with simulated_and_analysed(tmp_path_factory.mktemp("cf") / "w.duckdb", SIM, tuning=TuningSettings()) as wh:
        yield counterfactual.read(wh)["gt"]


def true_table(policy_change: dict[str, object], window_end: datetime) -> counterfactual.JobTable:
    """The seed's own jobs (their true work) simulated under the changed policy, drained: every job submitted in
    the window runs to completion, nothing arrives after it. The queue time after `window_end` (the replayed
    window's: its last submission) is the part a window alone would cut."""
    config = dataclasses.replace(SIM, policy=dataclasses.replace(SIM.policy, **policy_change))
    jobs = simulate(config).jobs
    out = simulate_jobs(jobs, config.pools, config.policy, math.inf, grid_s=config.sample_step_s)
    return counterfactual.job_table(out, window_s=(window_end - SIM.start).total_seconds())


def truth(policy_change: dict[str, object], window_end: datetime) -> dict[str, counterfactual.TierFigures]:
    return {f.tier: f for f in counterfactual.tier_figures(true_table(policy_change, window_end))}


@pytest.mark.parametrize(("scenario", "change"), [
    ("none", {"enabled": False}),
    ("today", {}),
    ("trigger_900", {"trigger_wait_s": 900.0}),
])
def test_replayed_counterfactual_matches_the_second_run_of_the_same_seed(
    stored: counterfactual.Answer, scenario: str, change: dict[str, object]
) -> None:
    true = truth(change, stored.run["window_end"])
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
    assert text.startswith(f"against plain queueing, preemption saved critical+high work {words.gpu_hours(saved)} ["
                           ), text
    assert f"it cost {words.gpu_hours(thrown)} [" in text and f"] ({words.THROWN_AWAY_DRAINED})" in text, text
    assert text.endswith("each run to completion)")


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


def _day_table(per_job: np.ndarray, submit: np.ndarray) -> counterfactual.JobTable:
    n = per_job.size
    return counterfactual.JobTable(
        tier=np.zeros(n, dtype=np.int64), gpus=np.ones(n), day=np.zeros(n, dtype=np.int64), first_wait_s=per_job,
        completion_s=per_job, waiting_s=per_job, thrown_gpu_s=per_job, victim_waiting_gpu_s=per_job,
        busy_gpu_s=per_job, preemptions=np.zeros(n), submit_s=submit,
    )


def test_a_window_of_one_day_still_gets_an_interval_that_can_hold_zero() -> None:
    """Over one day, resampling days made every replicate a whole multiple of the net ([0, 3 x net] whatever
    the data); the short window's stretches are resampled instead. Jobs gaining and losing in turn, a small net:
    its interval straddles zero. A week or more still resamples whole days."""
    rng = np.random.default_rng(5)
    n = 200
    per_job = np.where(np.arange(n) % 2 == 0, 10.0, -9.0) * rng.uniform(0.5, 1.5, n)
    table = _day_table(per_job, rng.uniform(0, 86_400.0, n))
    by_day = counterfactual.bootstrap_interval(per_job, table.day, 1000, 0.9)
    assert by_day[0] is not None and by_day[0] >= 0  # the old degenerate interval: never below zero
    blocks = counterfactual.resampling_blocks(table, 86_400.0)
    assert len(np.unique(blocks.of_job)) == 24 and blocks.unit.startswith("24 stretches of 60 min")
    low, high = counterfactual.bootstrap_interval(per_job, blocks.of_job, 1000, 0.9)
    assert low is not None and high is not None and low < 0 < high
    week = counterfactual.resampling_blocks(table, 7 * 86_400.0)
    assert (week.of_job == table.day).all() and week.unit == "1 submission day"


def test_a_one_day_interval_is_not_a_multiple_of_the_net() -> None:
    """Every job gains: over one day the old interval was [0, 3 x net] (whole multiples of the net, whatever the
    data). Resampled by hour, it is neither: it lies around the net, above 0, far inside [0, 3 x net]. A burst
    (every job in one hour) resamples the jobs themselves, and says so."""
    rng = np.random.default_rng(11)
    per_job = rng.uniform(5.0, 15.0, 300)
    net = per_job.sum()
    hourly = counterfactual.resampling_blocks(_day_table(per_job, rng.uniform(0, 86_400.0, 300)), 86_400.0)
    low, high = counterfactual.bootstrap_interval(per_job, hourly.of_job, 2000, 0.9)
    assert low is not None and high is not None
    assert 0.5 * net < low < net < high < 1.5 * net
    assert not any(float(x / net).is_integer() for x in (low, high))
    burst = counterfactual.resampling_blocks(_day_table(per_job, rng.uniform(0, 3_000.0, 300)), 86_400.0)
    assert (burst.of_job == np.arange(300)).all() and burst.unit.startswith("300 jobs one by one")
    low, high = counterfactual.bootstrap_interval(per_job, burst.of_job, 2000, 0.9)
    assert low is not None and high is not None and 0.8 * net < low < net < high < 1.2 * net


def test_the_interval_covers_the_replays_as_well_as_the_sample() -> None:
    """Rows of the same net over several replays: the interval widens to cover their spread, and always holds the
    first row's sum (the net shown)."""
    per_job = np.full(100, 1.0)
    blocks = np.arange(100) // 10
    alone = counterfactual.bootstrap_interval(per_job, blocks, 1000, 0.9)
    replays = np.stack([per_job, per_job + 0.5, per_job - 0.5])
    both = counterfactual.bootstrap_interval(replays, blocks, 1000, 0.9)
    assert alone[0] is not None and alone[1] is not None and both[0] is not None and both[1] is not None
    assert both[0] < alone[0] and both[1] > alone[1]
    assert both[0] < 50.0 and both[1] > 150.0  # the replays alone move the sum from 50 to 150
    shifted = counterfactual.bootstrap_interval(np.stack([per_job + 5.0, per_job, per_job]), blocks, 1000, 0.9)
    assert shifted[1] is not None and shifted[1] >= 600.0


def _scenario(key: str, table: counterfactual.JobTable, draws: tuple[counterfactual.JobTable, ...],
              trigger: float | None = None) -> counterfactual.Scenario:
    return counterfactual.Scenario(key, key, {}, trigger, table, counterfactual.tier_figures(table), draws=draws)


def test_a_sweep_that_is_not_monotone_says_so_and_why() -> None:
    """Trigger thresholds whose net falls, rises, falls: the rise is against the sweep's trend. When the jittered
    replays give that step both signs, it is the replay's own sensitivity; when every replay agrees, the note names
    the term that moves it."""
    tiers = ["critical", "low"]
    none = _table(tiers, [1000.0, 0.0], [0.0, 0.0])

    def trig(low_wait: float, jitter: float) -> counterfactual.JobTable:
        return _table(tiers, [0.0, low_wait + jitter], [0.0, 0.0])

    weights = {"critical": 4.0, "high": 2.0, "normal": 1.0, "low": 0.5}
    for jitters, why in (((30.0, -30.0), "within the replay's own sensitivity"),
                         ((5.0, -5.0), "holds on every one of 3 replays")):
        scenarios = [_scenario(f"trigger_{t}", trig(wait, 0.0),
                               tuple(trig(wait, j if t == 900 else 0.0) for j in jitters), float(t))
                     for t, wait in ((300, 1000.0), (900, 1010.0), (1800, 4000.0), (3600, 7000.0))]
        # plain: nets -500, -505, -2000, -3500 GPU-s x weights: the step 300 -> 900 falls with the trend; make
        # 900 -> 1800 a rise against it by giving 900 a longer low wait than 1800 in every replay but the jitter
        scenarios[1] = _scenario("trigger_900", trig(5000.0, 0.0),
                                 tuple(trig(5000.0, j * 100) for j in jitters), 900.0)
        base = _scenario("today", trig(1000.0, 0.0), (trig(1000.0, 0.0),) * 2)
        noned = _scenario("none", none, (none, none))
        notes = counterfactual.sweep_notes(noned, base, [noned, base, *scenarios], weights)
        text = notes["trigger"]
        assert text.startswith("the trigger sweep is not monotone: its net falls from"), text
        assert "from 15 min to 30 min it rises by" in text and why in text, text
        if "holds" in why:
            assert "lower-tier queue time saved" in text


def test_the_true_net_lies_inside_the_interval(stored: counterfactual.Answer) -> None:
    """The seed simulated again under each counterfactual policy: its true net against the true plain queue lies
    inside the stored interval, which covers the bootstrap and the jittered replays (and says so)."""
    weights = json.loads(stored.run["tier_weights"])

    def table(change: dict[str, object]) -> counterfactual.JobTable:
        sim = simulate(dataclasses.replace(SIM, policy=dataclasses.replace(SIM.policy, **change)))
        return counterfactual.job_table(sim.outcome)

    none = table({"enabled": False})
    for key, change in (("today", {}), ("trigger_900", {"trigger_wait_s": 900.0}),
                        ("trigger_3600", {"trigger_wait_s": 3600.0})):
        true = float(counterfactual.net_per_job(none, table(change), weights).sum()) / 3600.0
        row = stored.scenario(key)
        assert row is not None and row["net_low"] <= true <= row["net_high"], (key, true, row)
    covers = stored.run["interval_covers"]
    assert "stretches of 4.0 h" in covers and "8 more replays" in covers, covers


def test_a_net_whose_interval_holds_zero_has_no_sign_and_a_small_figure_is_not_zero(
    stored: counterfactual.Answer,
) -> None:
    run = {**stored.run, "net_value": -12.5, "net_low": -30.0, "net_high": 4.0, "thrown_away_gpu_h": 0.03,
           "thrown_away_gpu_h_low": 0.01, "thrown_away_gpu_h_high": 0.04}
    answer = counterfactual.Answer(stored.cluster, run, stored.scenarios, stored.figures)
    text = scorecard.net_text(answer)
    assert "cannot be told from 0 (-30.0 GPU-h to +4.0 GPU-h)" in text and "12.5" not in text, text
    assert "it cost 0.03 GPU-h [0.01 GPU-h to 0.04 GPU-h] (work thrown away" in scorecard.headline_text(answer)
    scenarios = [{**s, "net_value": -1.0, "net_low": -2.0, "net_high": 0.5} for s in stored.scenarios]
    lines = scorecard.alternatives_text(counterfactual.Answer(stored.cluster, run, scenarios, stored.figures))
    assert lines and all("net cannot be told from 0" in line for line in lines[:len(scenarios) - 2]), lines


def test_a_cluster_without_preemption_is_asked_what_turning_it_on_would_do(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The same seed simulated with preemption off: its counterfactual adds "on" (its tiers' may_preempt turned
    # on), which must match the seed simulated with preemption on, and the headline weighs it against today's.
    off = dataclasses.replace(SIM, policy=dataclasses.replace(SIM.policy, enabled=False))
    with simulated_and_analysed(tmp_path_factory.mktemp("cf-off") / "w.duckdb", off) as wh:
        answer = counterfactual.read(wh)["gt"]
    assert {s["scenario"] for s in answer.scenarios} >= {"none", "today", "on"}
    true = truth({}, answer.run["window_end"])
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


def test_the_drained_headline_per_tier_matches_the_same_seed_drained(stored: counterfactual.Answer) -> None:
    # The headline's waiting per job: the jobs whose queue time changed against no preemption, and their mean and
    # median extra queue time, per tier, against the same seed's jobs simulated without and with preemption.
    end = stored.run["window_end"]
    true = {c.tier: c for c in counterfactual.tier_changes(true_table({"enabled": False}, end), true_table({}, end))}
    compared = 0
    for tier in (*TIERS, "all"):
        row = stored.figure("today", tier)
        assert row is not None and row["undrained_jobs"] == 0, tier
        real = true[tier]
        assert abs(row["affected_jobs"] - real.affected) <= TOLERANCE * max(real.affected, 10), (tier, row, real)
        for name in ("extra_wait_mean_s", "extra_wait_p50_s"):
            replayed, expected = row[name], getattr(real, name)
            if expected is None:
                assert replayed is None, (tier, name, replayed)
                continue
            assert abs(replayed - expected) <= TOLERANCE * max(abs(expected), 300.0), (tier, name, replayed, expected)
            compared += 1
    assert compared >= 6
    # Queue time after the window's end is counted (drained) and is part of the tier's queue time.
    late = stored.figure("today", "all")
    assert late is not None and 0 < late["late_waiting_gpu_h"] < late["waiting_gpu_h"]
    # The window's capacity: the cluster's 64 GPUs from the window's first submission to its last.
    hours = (end - stored.run["window_start"]).total_seconds() / 3600.0
    assert stored.run["capacity_gpu_h"] == pytest.approx(64 * hours)
    text = " ".join(scorecard.tier_wait_lines(stored))
    assert f"the window's capacity: {words.gpu_hours(64 * hours)} (64 GPUs × {words.significant(hours)} h)" in text


def test_a_job_that_cannot_drain_is_named_and_left_out_of_the_net() -> None:
    # One 8-GPU node: a job that never ends holds it, so the job behind it never starts, even drained.
    pools = [PoolSpec("p", nodes=1, gpus_per_node=8)]
    jobs = [JobSpec("forever", "low", True, "p", 8, 0.0, math.inf),
            JobSpec("behind", "normal", True, "p", 8, 60.0, 600.0),
            JobSpec("small", "high", True, "p", 8, 30.0, 600.0)]
    policy = PolicyConfig(enabled=False)
    table = counterfactual.job_table(simulate_jobs(jobs, pools, policy, math.inf), window_s=3600.0)
    assert table.undrained is not None and table.undrained.tolist() == [False, True, True]
    figures = {f.tier: f for f in counterfactual.tier_figures(table)}
    assert figures["normal"].undrained == 1 and figures["normal"].waiting_gpu_h == 0.0
    assert figures["all"].undrained == 2
    assert np.isnan(table.first_wait_s[1])
    # A job that cannot drain counts nothing in the net, whatever its queue time to the replay's end.
    weights = {"critical": 4.0, "high": 2.0, "normal": 1.0, "low": 0.5}
    assert counterfactual.net_per_job(table, table, weights).tolist() == [0.0, 0.0, 0.0]
    changes = {c.tier: c for c in counterfactual.tier_changes(table, table)}
    assert changes["all"].undrained == 2 and changes["all"].affected == 0
def test_a_jittered_replay_is_paired_job_by_job_with_the_plain_one() -> None:
    """The engine runs a jittered replay's jobs shuffled (replay.event_order); its table comes back in the
    workload's order. With exact inputs and no simultaneous events every draw is the plain replay, job by job."""
    from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec
    from preemptlens.analytics.whatif.policy_in_force import PolicyBasis
    from preemptlens.analytics.whatif.replay import Variant, Workload, event_order
    from preemptlens.analytics.whatif.settings import Window

    jobs = tuple(JobSpec(f"j{i}", "low" if i % 3 else "high", i % 3 != 0, "gpu", 2 + 2 * (i % 3), 97.0 * i + 0.25 * i,
                         600.0 + 50.0 * i, checkpoint_interval_s=120.0) for i in range(12))
    start = datetime(2026, 12, 1, tzinfo=UTC)
    policy = PolicyConfig(min_run_s=0.0, grace_s=0.0, requeue_hold_s=0.0)
    workload = Workload(Window("c", start, start + timedelta(hours=3)), (PoolSpec("gpu", 1, 8),), jobs,
                        PolicyBasis(policy, {}), {}, ())
    assert event_order(12, 3) != list(range(12)) and sorted(event_order(12, 3)) == list(range(12))
    plain, _ = counterfactual.run_scenario(workload, "today", "", Variant("today", policy))
    assert plain.table.preemptions.sum() > 0
    for seed in (1, 2, 3):
        draw = counterfactual.run_draw(workload, Variant("today", policy, jitter=seed))
        for name in ("gpus", "first_wait_s", "waiting_s", "thrown_gpu_s", "preemptions", "submit_s"):
            assert np.array_equal(getattr(draw, name), getattr(plain.table, name), equal_nan=True), (seed, name)


def test_every_per_tier_figure_carries_an_interval_that_holds_the_truth(stored: counterfactual.Answer) -> None:
    """Each per-tier figure of each scenario (waits, completion, work thrown away, queue GPU-hours, ...; against no
    preemption, the jobs affected and their mean and median extra queue time) has an interval made as the net's,
    and the same seed simulated again, drained, under that scenario's policy gives a true figure inside it; the
    words print the intervals and give no sign to an extra queue time whose interval holds 0."""
    end = stored.run["window_end"]
    none = true_table({"enabled": False}, end)
    checked: dict[str, int] = {}
    for key, change in (("none", {"enabled": False}), ("today", {}), ("trigger_900", {"trigger_wait_s": 900.0})):
        table = none if key == "none" else true_table(change, end)
        own = {f.tier: dataclasses.asdict(f) for f in counterfactual.tier_figures(table)}
        paired = {c.tier: {"affected_jobs": c.affected, "extra_wait_mean_s": c.extra_wait_mean_s,
                           "extra_wait_p50_s": c.extra_wait_p50_s}
                  for c in counterfactual.tier_changes(none, table)}
        names = {"waiting_gpu_h", "wait_p50_s", "wait_p90_s", "completion_p50_s", "thrown_away_gpu_h",
                 "victim_waiting_gpu_h", "late_waiting_gpu_h", "busy_gpu_h"}
        for tier in (*TIERS, "all"):
            row = stored.figure(key, tier)
            assert row is not None, (key, tier)
            truths = {name: own[tier][name] for name in names}
            if key != "none":
                truths.update(paired[tier])
            for name, real in truths.items():
                lo, hi = counterfactual.interval_columns(name)
                if row[name] is None:
                    # no job of the tier gives the figure: no figure, no interval
                    assert row[lo] is None and row[hi] is None, (key, tier, name, row)
                    continue
                if row[lo] is None:
                    continue  # an interval that could not be made reads "unknown" (below)
                assert row[lo] <= row[name] <= row[hi], (key, tier, name, row[lo], row[name], row[hi])
                assert real is not None and row[lo] <= real <= row[hi], (key, tier, name, row[lo], real, row[hi])
                checked[key] = checked.get(key, 0) + 1
    assert min(checked.values()) >= 25 and len(checked) == 3, checked
    text = "\n".join(scorecard.tier_wait_lines(stored))
    normal = stored.figure("today", "normal")
    assert normal is not None
    assert f"[{round(normal['affected_jobs_low']):,} to {round(normal['affected_jobs_high']):,}]" in text, text
    assert f"{words.gpu_hours(normal['waiting_gpu_h'])} [{words.quantity(normal['waiting_gpu_h_low'], words.GPU_H)}" \
        in text, text
    assert "the ranges are each figure's 90% interval" in text, text
    # an extra queue time whose interval holds 0 has no sign; an interval that could not be made says so
    figures = [{**f, "extra_wait_mean_s": 120.0, "extra_wait_mean_low_s": -60.0, "extra_wait_mean_high_s": 300.0,
                "extra_wait_p50_low_s": None, "extra_wait_p50_high_s": None}
               if f["scenario"] == "today" and f["tier"] == "low" else f for f in stored.figures]
    moved = scorecard.tier_wait_lines(counterfactual.Answer(stored.cluster, stored.run, stored.scenarios, figures))
    low = next(line for line in moved if line.startswith("low: "))
    assert "by cannot be told from 0 (-60 s to +5 min) a job on average" in low, low
    assert "(interval unknown))" in low and "+2 min a job" not in low, low
    rows = scorecard.tier_rows(counterfactual.Answer(stored.cluster, stored.run, stored.scenarios, figures))
    mean = next(r for r in rows if r["tier"] == "low" and r["figure"].endswith("mean"))
    assert mean["today"].startswith("cannot be told from 0"), mean
    # a figure the same in every replicate reads without a range; one with a range prints it
    figures = [{**f, "victim_waiting_gpu_h": 0.0, "victim_waiting_gpu_h_low": 0.0, "victim_waiting_gpu_h_high": 0.0,
                "wait_p90_s": 600.0, "wait_p90_low_s": 300.0, "wait_p90_high_s": 5400.0}
               if f["scenario"] == "today" and f["tier"] == "low" else f for f in stored.figures]
    rows = scorecard.tier_rows(counterfactual.Answer(stored.cluster, stored.run, stored.scenarios, figures))
    cells = {r["figure"]: r["today"] for r in rows if r["tier"] == "low"}
    assert cells["victims' waiting"] == "0.0 GPU-h", cells
    assert cells["first-start wait, p90"] == "10 min [5 min to 1.5 h]", cells


def test_the_headline_terms_carry_intervals_that_hold_the_truth(stored: counterfactual.Answer) -> None:
    """The headline's three terms (critical+high queue time saved, work thrown away, lower-tier queue time added)
    each have an interval made as the net's; the same seed simulated again, drained, without and with preemption
    gives true terms inside them, and the sentence prints each interval in its own direction."""
    end = stored.run["window_end"]
    true = {side: {f.tier: f for f in counterfactual.tier_figures(true_table(change, end))}
            for side, change in (("none", {"enabled": False}), ("today", {}))}
    truths = {
        "high_wait_saved_gpu_h": sum(true["none"][t].waiting_gpu_h - true["today"][t].waiting_gpu_h
                                     for t in ("critical", "high")),
        "thrown_away_gpu_h": true["today"]["all"].thrown_away_gpu_h - true["none"]["all"].thrown_away_gpu_h,
        "lower_wait_added_gpu_h": sum(true["today"][t].waiting_gpu_h - true["none"][t].waiting_gpu_h
                                      for t in ("normal", "low")),
    }
    run = stored.run
    text = scorecard.headline_text(stored)
    for column, real in truths.items():
        low, high = run[f"{column}_low"], run[f"{column}_high"]
        assert low is not None and low <= run[column] <= high, (column, low, run[column], high)
        assert low <= real <= high, (column, low, real, high)
        assert low < high, (column, low, high)  # eight jittered replays and 24 stretches: not a point
        if low >= 0:
            assert f"{words.gpu_hours(run[column])} [{words.gpu_hours(low)} to {words.gpu_hours(high)}]" in text, text
    # a term whose interval holds 0 has both signs; a cost worded as a saving less reads its magnitude
    answer = counterfactual.Answer(stored.cluster, {
        **run, "high_wait_saved_gpu_h": -2.0, "high_wait_saved_gpu_h_low": -3.5, "high_wait_saved_gpu_h_high": -1.25,
        "lower_wait_added_gpu_h": 4.0, "lower_wait_added_gpu_h_low": -1.0, "lower_wait_added_gpu_h_high": 9.0,
        "thrown_away_gpu_h_low": None}, stored.scenarios, stored.figures)
    text = scorecard.headline_text(answer)
    assert "cost critical+high work 2.0 GPU-h [1.2 GPU-h to 3.5 GPU-h] of extra queue time" in text, text
    assert "4.0 GPU-h [cannot be told from 0 (-1.0 GPU-h to +9.0 GPU-h)] of lower-tier queue time" in text, text
    assert "(interval unknown) (work thrown away" in text, text


def test_a_per_tier_interval_that_cannot_be_made_is_unknown() -> None:
    """One changed job in one block: most resamples leave it out, so its mean extra wait has no interval."""
    tiers = ["critical"] * 10 + ["low"] * 10
    base = _table(tiers, [0.0] * 20, [0.0] * 20)
    other = _table(tiers, [0.0] * 19 + [600.0], [0.0] * 20)
    none = _scenario("none", base, ())
    today = _scenario("today", other, ())
    found = counterfactual.figure_intervals(none, today, 200, 0.9, 86400.0)
    assert found["low"]["extra_wait_mean_s"] == (None, None)
    assert found["critical"]["extra_wait_mean_s"] == (None, None)  # no job changed: no figure
    low, high = counterfactual.figure_intervals(none, none, 200, 0.9, 86400.0)["low"]["waiting_gpu_h"]
    assert low is not None and high is not None and low <= 0.0 <= high
