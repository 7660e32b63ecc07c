"""The readiness scorecard's Q1 measures by hand, and unknown as a value: no data is null, never a "no".

Pool p has 4 GPUs for five hours of data. Job a (normal) holds all 4 for hours
0-4, one of them idle (busy 0) for hours 0-2; job b (low, 2 GPUs) is submitted
at 0 and waits until hour 4, then runs for an hour. So:

- waiting: 2 GPU-hours in each of hours 0-3, half the capacity: 4 of 5 hours
  under queue pressure (0.8);
- allocated net of hoarding: hours 0-1 3/4, hours 2-3 4/4, hour 4 2/4: 2 of 5
  hours busy (0.4, below 0.5): the GPUs are not really scarce, one is hoarded;
  by allocation alone 4 of 5 hours would reach 0.85;
- normal and low jobs wait 0 and 4 h before their first start: median 2 h.
"""

from __future__ import annotations

import math

import pytest
from analytics_scenario import Scenario

from preemptlens.analytics.scorecard import SCORECARD_SQL, answer_text
from preemptlens.dashboards.metrics import read_families

HOUR = 3600.0


def build(sc: Scenario, *, samples: bool) -> None:
    sc.pool("p", 4)
    sc.job("a", "normal", 4, "p", 0)
    sc.run("a", 1, 4, "p", 0, 4 * HOUR, "completed", submit=0)
    sc.job("b", "low", 2, "p", 0)
    sc.run("b", 1, 2, "p", 4 * HOUR, 5 * HOUR, "completed", submit=0)
    # a's training log reports its step but no checkpoint: collected, so Q3 is a measured no
    sc.checkpoint("a", 1, HOUR, 100.0, kind="progress")
    if samples:
        sc.samples("a", "h1", 0, 0, 2 * HOUR, busy=0.0)
        sc.samples("a", "h1", 0, 2 * HOUR, 4 * HOUR, busy=0.9)


def evidence(sc: Scenario) -> dict[str, dict]:
    return {r["measure"]: r for r in sc.view("readiness_evidence", "measure").to_dicts()}


def test_q1_measures_by_hand(sc: Scenario) -> None:
    build(sc, samples=True)
    sc.analyze()
    e = evidence(sc)
    assert e["queue_pressure_hours_share"]["value"] == pytest.approx(4 / 5)
    assert e["queue_pressure_hours_share"]["passes"] is True
    assert e["busy_hours_share"]["value"] == pytest.approx(2 / 5)
    assert e["busy_hours_share"]["passes"] is False
    assert e["lower_tier_wait_p50_s"]["value"] == pytest.approx(2 * HOUR)
    assert e["high_wait_unpreempted_p50_s"]["value"] is None
    assert e["high_wait_unpreempted_p50_s"]["missing"] == "no critical or high runs: their wait unknown"
    assert e["hoarded_share_of_allocated"]["value"] == pytest.approx(2 / 18)
    card = sc.view("readiness_scorecard", "question_no").to_dicts()
    # work waits, but GPUs held idle are not scarce GPUs: a measured no
    assert card[0]["answer"] is False
    assert card[0]["missing"] is None
    assert "reclaiming idle GPUs" in card[0]["fix_first"]


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
    # unknown: neither reclaiming (hoarding unknown) nor quotas (Q1 and Q2 unknown), only Q3's tiered pools.
    assert [c["answer"] for c in card] == [None, None, False, None]
    assert card[0]["fix_first"] == "tiered pools"
    assert card[0]["verdict"] == "cannot tell yet"


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
    assert "Q3" in card["unanswered"] and "tiered pools" not in (card["fix_first"] or "")


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
    assert answer_text(card["answer"], card["missing"], failed) == "no (jobs checkpoint rarely)"


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
    # progress reports only: v reached step 500 at 500 s and 900 at 900 s; its restart resumes from step 500, a
    # checkpoint no collector saw, taken after the run began
    for t, step in ((100, 100.0), (500, 500.0), (900, 900.0)):
        sc.checkpoint("v", 1, t, step, kind="progress")
    for t, step in ((1200, 500.0), (1500, 800.0)):
        sc.checkpoint("v", 2, t, step, kind="progress")
    sc.analyze()
    ledger = sc.view("preemption_ledger", "time").row(0, named=True)
    assert ledger["basis"] == "rollback" and ledger["lost_s"] == pytest.approx(500)
    e, card = q3(sc)
    assert e["checkpoint_coverage"]["value"] == 1.0
    assert e["loss_to_gain"]["value"] is not None
    assert card["answer"] is not False
