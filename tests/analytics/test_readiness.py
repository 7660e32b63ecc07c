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

import json
import math

import pytest
from analytics_scenario import Scenario, at

from preemptlens.analytics.whatif import scorecard
from preemptlens.analytics.whatif.scorecard import SCORECARD_SQL, answer_text
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
    # a's training log reports its step but no checkpoint: collected, so Q3 is a measured no
    sc.checkpoint("a", 1, HOUR, 100.0, kind="progress")
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


def q3(sc: Scenario) -> tuple[dict[str, dict], dict]:
    e = {r["measure"]: r for r in sc.view("readiness_evidence", "measure").to_dicts() if r["question_no"] == 3}
    card = sc.view("readiness_scorecard", "question_no").to_dicts()[2]
    return e, card


def preempted_pair(sc: Scenario, **victim: object) -> None:
    """Pool q: low job v (4 GPUs) runs 0-1000 s, is preempted by critical p, restarts at 1100 s and completes."""
    sc.pool("q", 4)
    sc.job("v", "low", 4, "q", -60, team="victims", work_s=4000.0, **victim)
    sc.run("v", 1, 4, "q", 0, 1000, "preempted", preemptor_job_id="p", reason="prio")
    sc.run("v", 2, 4, "q", 1100, 4400, "completed")
    sc.job("p", "critical", 4, "q", 990, team="prod")
    sc.run("p", 1, 4, "q", 1000, 1100, "completed")


def test_q3_without_checkpoint_data_is_unknown_naming_the_collector_not_no(sc: Scenario) -> None:
    preempted_pair(sc)
    sc.analyze()
    e, card = q3(sc)
    # nothing collected: a coverage of 0 says nothing, the loss is assumed, so neither measure can say no
    assert e["checkpoint_coverage"]["value"] is None and e["checkpoint_coverage"]["passes"] is None
    assert "enable `preemptlens collect checkpoints`" in e["checkpoint_coverage"]["missing"]
    assert e["loss_to_gain"]["value"] is None
    assert "enable `preemptlens collect checkpoints`" in e["loss_to_gain"]["missing"]
    assert card["answer"] is None
    assert answer_text(card["answer"], card["missing"]).startswith(
        "unknown (no checkpoint or progress data: enable `preemptlens collect checkpoints` (its files, logs, "
        "prometheus or annotations stream)"
    )
    # an unknown is no failure: the verdict names no recovery fix for it
    verdict = sc.wh.query("SELECT cluster, fix_kinds FROM readiness_verdict").row(0, named=True)
    failures = scorecard.failures_of(sc.wh, verdict["cluster"])
    assert "Q3" in card["unanswered"] and "Q3" not in failures
    kinds = set(json.loads(verdict["fix_kinds"]))
    assert kinds <= set(scorecard.addressed(failures))
    assert all(set(scorecard.FIXES[item]) & kinds for item in failures)


def test_q3_declared_intervals_answer_only_when_they_already_pass(sc: Scenario) -> None:
    preempted_pair(sc, checkpoint_interval_s=600.0)
    sc.analyze()
    e, _ = q3(sc)
    # every preemptible GPU-hour declares an interval: a lower bound that passes is an answer
    assert e["checkpoint_coverage"]["value"] == 1.0 and e["checkpoint_coverage"]["passes"] is True
    # a declared loss is no measurement: loss to gain stays unknown
    assert e["loss_to_gain"]["value"] is None and "collect checkpoints" in e["loss_to_gain"]["missing"]


def test_q3_a_measured_no_says_jobs_checkpoint_rarely(sc: Scenario) -> None:
    preempted_pair(sc)
    # v's training log reports its step, so checkpoint data was collected, and v never saved a checkpoint
    sc.checkpoint("v", 1, 500, 50.0, kind="progress")
    sc.analyze()
    e, card = q3(sc)
    assert e["checkpoint_coverage"]["value"] == 0 and e["checkpoint_coverage"]["passes"] is False
    assert card["answer"] is False
    failed = sc.wh.query(f"SELECT failed FROM ({SCORECARD_SQL}) WHERE question_no = 3")["failed"][0]
    assert answer_text(card["answer"], card["missing"], failed=failed) == "no (jobs checkpoint rarely)"


def test_q3_loss_to_gain_from_measured_losses_once_enough_are(sc: Scenario) -> None:
    preempted_pair(sc)
    sc.checkpoint("v", 1, 800, 80.0)
    # a second victim in another pool, w, wrote nothing: its loss is assumed, its gain known
    sc.pool("r", 4)
    sc.job("w", "low", 4, "r", -60, team="victims", work_s=4000.0)
    sc.run("w", 1, 4, "r", 0, 1000, "preempted", preemptor_job_id="p2", reason="prio")
    sc.run("w", 2, 4, "r", 1100, 4400, "completed")
    sc.job("p2", "critical", 4, "r", 990, team="prod")
    sc.run("p2", 1, 4, "r", 1000, 1100, "completed")
    sc.analyze()
    e, _ = q3(sc)
    ledger = {r["victim_job_id"]: r for r in sc.view("preemption_ledger", "time").to_dicts()}
    assert (ledger["v"]["basis"], ledger["w"]["basis"]) == ("checkpoint", "assumed")
    assert ledger["v"]["gain_gpu_s"] and ledger["w"]["gain_gpu_s"]
    # half the preemptions with a known gain have a measured loss (loss_coverage_min 0.5): the ratio is v's alone
    assert e["loss_to_gain"]["value"] == pytest.approx(ledger["v"]["wasted_gpu_s"] / ledger["v"]["gain_gpu_s"])
    sc.analyze(loss_coverage_min=0.75)
    e, _ = q3(sc)
    assert e["loss_to_gain"]["value"] is None
    assert e["loss_to_gain"]["missing"].startswith(
        "loss measured for 50% of the preemptions with a known gain (needs 75%)"
    )


def test_q3_a_restart_past_its_run_start_shows_the_job_checkpoints(sc: Scenario) -> None:
    preempted_pair(sc)
    # progress reports only (steps completed): v reached step 500 at 500 s and 900 at 900 s; its restart resumes
    # from step 500 (its first report says 501 done), a checkpoint no collector saw, taken after the run began
    for t, step in ((100, 100.0), (500, 500.0), (900, 900.0)):
        sc.checkpoint("v", 1, t, step, kind="progress")
    for t, step in ((1200, 501.0), (1500, 800.0)):
        sc.checkpoint("v", 2, t, step, kind="progress")
    sc.analyze()
    ledger = sc.view("preemption_ledger", "time").row(0, named=True)
    assert ledger["basis"] == "rollback" and ledger["lost_s"] == pytest.approx(500)
    e, card = q3(sc)
    assert e["checkpoint_coverage"]["value"] == 1.0
    assert e["loss_to_gain"]["value"] is not None
    assert card["answer"] is not False


def test_verdict_alert_words_the_verdict_as_everywhere_and_posts_once_per_verdict(sc: Scenario) -> None:
    from datetime import UTC, datetime

    from preemptlens.analytics import alerts
    from preemptlens.analytics.whatif import scorecard
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
