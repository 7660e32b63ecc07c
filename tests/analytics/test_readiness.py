"""The readiness scorecard's Q1 measures by hand, and unknown as a value: no data is null, never a "no".

Pool p has 4 GPUs, pool q 1, for five hours of data. Job a (normal) holds all of p's 4 GPUs from hour 0 and
still runs at the data's end, one of them idle (busy 0) for hours 0-3; job e holds q's GPU for the five hours
and completes; job b (low, 2 GPUs) is submitted at 0 into p and waits throughout. Replayed without preemption
(there was none) the same runs hold the same GPUs. So:

- waiting: b's 2 GPU-hours in each hour, 2/5 of the capacity: 5 of 5 hours under queue pressure;
- allocated net of the idle GPU: hours 0-2 4/5, hours 3-4 5/5: 2 of 5 hours busy (0.4, below 0.5): the GPUs
  are not really scarce, one is hoarded; by allocation alone every hour would reach 0.85;
- a's 4 and e's GPU waited 0, b's 2 GPUs 5 h: the GPU-weighted time in the queue is 2 x 5 h / 7;
- job c asks for 8 GPUs of the 4-GPU pool: it can never start, so Q1 leaves it out and counts it apart.
"""

from __future__ import annotations

import math

import pytest
from analytics_scenario import Scenario, at

from preemptlens.dashboards.metrics import read_families

HOUR = 3600.0


def build(sc: Scenario, *, samples: bool) -> None:
    sc.pool("p", 4)
    sc.pool("q", 1)
    sc.job("a", "normal", 4, "p", 0)
    sc.run("a", 1, 4, "p", 0, None, "running", submit=0)
    sc.job("e", "normal", 1, "q", 0)
    sc.run("e", 1, 1, "q", 0, 5 * HOUR, "completed", submit=0)
    sc.job("b", "low", 2, "p", 0)
    sc.add("job_runs", job_id="b", run=1, gpus=2, pool="p", submit_time=at(0), state="pending")
    sc.job("c", "low", 8, "p", 0)
    sc.add("job_runs", job_id="c", run=1, gpus=8, pool="p", submit_time=at(0), state="pending")
    if samples:
        sc.samples("a", "h1", 0, 0, 3 * HOUR, busy=0.0)
        sc.samples("a", "h1", 0, 3 * HOUR, 5 * HOUR, busy=0.9)


def evidence(sc: Scenario) -> dict[str, dict]:
    return {r["measure"]: r for r in sc.view("readiness_evidence", "measure").to_dicts()}


def test_q1_measures_by_hand(sc: Scenario) -> None:
    build(sc, samples=True)
    sc.analyze()
    e = evidence(sc)
    assert e["queue_pressure_hours_share"]["value"] == pytest.approx(5 / 5)
    assert e["queue_pressure_hours_share"]["passes"] is True
    assert e["busy_hours_share"]["value"] == pytest.approx(2 / 5)
    assert e["busy_hours_share"]["passes"] is False
    assert e["queued_gpu_wait_s"]["value"] == pytest.approx(2 * 5 * HOUR / 7)
    assert e["queued_gpu_wait_s"]["passes"] is True
    assert e["jobs_never_fit"]["value"] == 1 and e["jobs_never_fit"]["passes"] is None
    assert e["hoarded_share_of_allocated"]["value"] == pytest.approx(3 / 25)
    card = sc.view("readiness_scorecard", "question_no").to_dicts()
    # work waits, but GPUs held idle are not scarce GPUs: a measured no
    assert card[0]["answer"] is False
    assert card[0]["missing"] is None
    (verdict,) = sc.view("readiness_verdict", "cluster").to_dicts()
    assert verdict["fix_first"].startswith("reclaim idle GPUs")


def test_without_gpu_samples_q1_and_hoarding_are_unknown_not_no(sc: Scenario) -> None:
    build(sc, samples=False)
    sc.analyze()
    e = evidence(sc)
    # queue pressure passes, but how busy the GPUs really were needs the samples
    assert e["queue_pressure_hours_share"]["passes"] is True
    assert e["busy_hours_share"]["value"] is None and e["busy_hours_share"]["passes"] is None
    assert e["busy_hours_share"]["missing"] == "no GPU samples: hoarding unknown"
    assert e["hoarded_share_of_allocated"]["value"] is None
    assert e["hoarded_share_of_allocated"]["missing"] == "no GPU samples: hoarding unknown"
    card = sc.view("readiness_scorecard", "question_no").to_dicts()
    assert card[0]["answer"] is None
    assert card[0]["missing"] == "no GPU samples: hoarding unknown"
    assert "Q1" in card[0]["unanswered"]
    assert "no GPU samples: hoarding unknown" in card[0]["collect"]
    # Q2 is unknown too (one week: no trend); Q3 a measured no (no checkpoints). No fix on the strength of an
    # unknown: neither reclaiming (hoarding unknown) nor quotas (Q1 and Q2 unknown), only Q3's checkpoints.
    assert [c["answer"] for c in card] == [None, None, False, None]
    (verdict,) = sc.view("readiness_verdict", "cluster").to_dicts()
    assert verdict["fix_first"] == "checkpoints"
    assert verdict["verdict"] == "cannot tell yet"


def test_without_pools_capacity_is_unknown(sc: Scenario) -> None:
    build(sc, samples=True)
    sc.rows.pop("pools")
    sc.analyze()
    e = evidence(sc)
    for measure in ("queue_pressure_hours_share", "busy_hours_share"):
        assert e[measure]["value"] is None, measure
        assert "no pools rows: capacity unknown" in e[measure]["missing"], measure
    card = sc.view("readiness_scorecard", "question_no").to_dicts()
    assert card[0]["answer"] is None
    assert card[0]["missing"] == "no pools rows: capacity unknown"


def test_metrics_show_an_unknown_answer_as_nan_with_known_0(sc: Scenario) -> None:
    build(sc, samples=False)
    sc.analyze()
    families = {f.name: f for f in read_families(sc.wh.con, top_teams=5)}
    answer = {s.labels["question"]: s.value for s in families["preemptlens_readiness"].samples}
    known = {s.labels["question"]: s.value for s in families["preemptlens_readiness_known"].samples}
    assert math.isnan(answer["1"]) and known["1"] == 0.0
    assert answer["3"] == 0.0 and known["3"] == 1.0
    (unknown,) = families["preemptlens_readiness_unknown"].samples
    assert unknown.value == 3.0


def test_verdict_alert_words_the_verdict_as_everywhere_and_posts_once_per_verdict(sc: Scenario) -> None:
    from datetime import UTC, datetime

    from preemptlens.analytics import alerts, scorecard
    from preemptlens.config import load_config

    build(sc, samples=True)
    sc.analyze()
    rule = alerts.RULES["verdict"]
    (alert,) = rule.evaluate(sc.wh, load_config(), datetime.now(UTC))
    line = scorecard.verdict_line(sc.wh, "c1")
    assert line is not None and alert.text.startswith(f"c1: {line}.")
    assert alert.facts["verdict"] == scorecard.NOT_MAIN or alert.facts["verdict"] == scorecard.CANNOT_TELL
    # the same verdict keeps its key (delivered once); another verdict gets another key
    (again,) = rule.evaluate(sc.wh, load_config(), datetime.now(UTC))
    assert again.dedupe_key == alert.dedupe_key
    sc.wh.con.execute("UPDATE readiness_verdict SET verdict = $v", {"v": scorecard.MAIN})
    (changed,) = rule.evaluate(sc.wh, load_config(), datetime.now(UTC))
    assert changed.dedupe_key != alert.dedupe_key


def test_metrics_give_the_verdict_the_net_and_borderline_answers(sc: Scenario) -> None:
    build(sc, samples=True)
    sc.analyze()
    families = {f.name: f for f in read_families(sc.wh.con, top_teams=5)}
    (verdict,) = sc.view("readiness_verdict", "cluster").to_dicts()
    (sample,) = families["preemptlens_verdict"].samples
    assert sample.labels == {"cluster": "c1", "verdict": verdict["verdict"]} and sample.value == 1.0
    (borderline,) = families["preemptlens_verdict_borderline"].samples
    assert borderline.value == float(verdict["borderline"])
    assert {s.labels["question"] for s in families["preemptlens_readiness_borderline"].samples} == {"1", "2", "3", "4"}
    # nothing was preempted: today's policy replays as no preemption, a net of exactly 0 with its bounds
    net = {s.labels["bound"]: s.value for s in families["preemptlens_counterfactual_net_gpu_hours"].samples}
    assert net == {"value": 0.0, "low": 0.0, "high": 0.0}
    # and no break-even factor to give (the upper tiers gain nothing at any weight)
    assert families["preemptlens_counterfactual_breakeven_factor"].samples == []
