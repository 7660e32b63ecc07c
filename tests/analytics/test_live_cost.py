"""The live preemption cost, the expected requeue wait and the Preemptions page's victim costs, against
hand-computed ground truth.

Pool a (low tier): R1 (8 GPUs, checkpoints) was preempted at 1000 s (last checkpoint 500 s), restarted at 1300 s
(requeue 300 s) and resumed its restored step 50 s later (warm-up 50 s, from its progress reports); it still
runs, last checkpoint at 9000 s. H2 (4 GPUs) was preempted at 2000 s and restarted at 2500 s (requeue 500 s),
no progress data. Both restarted: half of the low tier's victims had restarted by 300 s (Kaplan-Meier), so a
low-tier job expects a requeue of 300 s (two victims are too few for pool a's or a size's own estimate: the
tier's answers, in pool b too). R2 (normal tier, pool a, 2 GPUs) declares a 600 s checkpoint interval and runs
since 7000 s: no requeue history for its tier. R3 (pool b, 1 GPU) has no checkpoint data at all and runs since
9500 s: no warm-up known in pool b.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from analytics_scenario import Scenario, analysed, at

from preemptlens.analytics.livecost import LiveCostSettings, compute, top
from preemptlens.cli import main
from preemptlens.contract import Batch, Watermark
from preemptlens.warehouse import Warehouse

AT = 10_000.0
SETTINGS = LiveCostSettings(
    interval_s=300.0, recent_window_s=7 * 86400.0, keep_days=14.0, top_jobs=20, endpoint_limit=1000
)


def build(sc: Scenario) -> None:
    sc.job("R1", "low", 8, "a", -60, team="vision", work_s=20_000.0)
    sc.run("R1", 1, 8, "a", 0, 1000, "preempted", preemptor_job_id="P1")
    sc.checkpoint("R1", 1, 500, 50)
    sc.run("R1", 2, 8, "a", 1300, None, "running")
    # progress resumes past step 50 at 0.1 step/s: back-extrapolated, step 50 was reached at 1350 s
    sc.checkpoint("R1", 2, 1450, 60, kind="progress")
    sc.checkpoint("R1", 2, 1550, 70, kind="progress")
    sc.checkpoint("R1", 2, 9000, 800)
    sc.job("P1", "critical", 8, "a", 990, team="infer")
    sc.run("P1", 1, 8, "a", 1000, 1200, "completed")

    sc.job("H2", "low", 4, "a", -60, team="nlp")
    sc.run("H2", 1, 4, "a", 0, 2000, "preempted", preemptor_job_id="P1")
    sc.run("H2", 2, 4, "a", 2500, 4000, "completed")

    sc.job("R2", "normal", 2, "a", 6000, team="rl", checkpoint_interval_s=600.0)
    sc.run("R2", 1, 2, "a", 7000, None, "running")

    sc.job("R3", "low", 1, "b", 9000, team="new")
    sc.run("R3", 1, 1, "b", 9500, None, "running")

    # ended before AT, and started after it: neither runs at AT
    sc.job("E1", "low", 4, "a", -60, team="nlp")
    sc.run("E1", 1, 4, "a", 0, 9999, "completed")
    sc.job("L1", "low", 4, "a", 9900, team="nlp")
    sc.run("L1", 1, 4, "a", 10_001, None, "running")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    with analysed(tmp_path_factory.mktemp("live"), build) as sc:
        done = compute(sc.wh, at(AT), SETTINGS)
        assert (done.jobs, done.unknown) == (3, 2)
        return sc.wh.query("SELECT * FROM live_costs ORDER BY job_id")


def job(live: pl.DataFrame, job_id: str) -> dict[str, object]:
    rows = live.filter(pl.col("job_id") == job_id).to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_expected_requeue_is_the_tiers_when_its_pool_has_too_few_victims(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    estimate = "SELECT DISTINCT tier, expected_requeue_s, victims, restarted, requeue_group FROM expected_requeue"
    with analysed(tmp_path_factory.mktemp("requeue"), build) as sc:
        assert sc.wh.query(estimate).rows() == [("low", 300.0, 2, 2, "tier")]
        assert sc.wh.query("SELECT DISTINCT pool FROM expected_requeue ORDER BY pool")["pool"].to_list() == ["a", "b"]
        # data end 10 001 s: a window of 8 500 s keeps H2's preemption (2 000 s), not R1's (1 000 s)
        sc.analyze(requeue_window_s=8500.0)
        assert sc.wh.query(estimate).rows() == [("low", 500.0, 1, 1, "tier")]
        sc.analyze(requeue_window_s=1000.0)
        assert sc.view("expected_requeue", "pool, tier").is_empty()


def test_only_jobs_running_at_the_instant(live: pl.DataFrame) -> None:
    assert live["job_id"].to_list() == ["R1", "R2", "R3"]
    assert set(live["computed_at"].to_list()) == {at(AT)}


def test_checkpointed_job_costs_its_gpus_times_at_risk_warmup_and_requeue(live: pl.DataFrame) -> None:
    r1 = job(live, "R1")
    assert (r1["basis"], r1["run"], r1["last_checkpoint_time"]) == ("checkpoint", 2, at(9000))
    assert r1["progress_source"] == "test"  # the checkpoint rows' source: they name no stream
    assert r1["at_risk_gpu_s"] == 8 * 1000.0
    assert (r1["warmup_basis"], r1["warmup_gpu_s"]) == ("job", 8 * 50.0)
    assert r1["requeue_gpu_s"] == 8 * 300.0
    assert r1["cost_gpu_s"] == 8 * (1000.0 + 50.0 + 300.0)
    assert r1["unknown"] is None
    # work done: 1000 s + 8700 s of runs, less the 500 s lost and 50 s warm-up of its preemption, of 20 000 s
    assert r1["near_completion_share"] == pytest.approx((1000 + 8700 - 550) / 20_000)
    assert (r1["job_preemptions_recent"], r1["team_preemptions_recent"]) == (1, 1)


def test_declared_job_without_requeue_history_has_unknown_cost(live: pl.DataFrame) -> None:
    r2 = job(live, "R2")
    assert (r2["basis"], r2["at_risk_gpu_s"], r2["progress_source"]) == ("declared", 2 * 300.0, "test")
    # no measured warm-up of the job or its team: the pool's
    assert (r2["warmup_basis"], r2["warmup_gpu_s"]) == ("pool", 2 * 50.0)
    assert r2["requeue_gpu_s"] is None and r2["cost_gpu_s"] is None
    assert r2["unknown"] is not None and r2["unknown"].startswith("requeue wait:")
    assert r2["near_completion_share"] is None, "no work_s: unknown, never 0"
    assert (r2["job_preemptions_recent"], r2["team_preemptions_recent"]) == (0, 0)


def test_job_without_checkpoint_data_risks_its_whole_run(live: pl.DataFrame) -> None:
    r3 = job(live, "R3")
    assert (r3["basis"], r3["at_risk_gpu_s"], r3["progress_source"]) == ("assumed", 500.0, None)
    # pool b's low tier has no victim: the tier's expected requeue answers; no warm-up is known there
    assert r3["warmup_gpu_s"] is None and r3["requeue_gpu_s"] == 300.0 and r3["cost_gpu_s"] is None
    assert r3["unknown"] is not None
    assert "warm-up" in r3["unknown"] and "requeue wait" not in r3["unknown"]


def test_recomputing_the_same_instant_changes_nothing_and_history_is_bounded(wh: Warehouse, sc: Scenario) -> None:
    build(sc)
    sc.analyze()
    compute(wh, at(AT), SETTINGS)
    before = wh.query("SELECT * FROM live_costs ORDER BY job_id")
    compute(wh, at(AT), SETTINGS)
    assert wh.query("SELECT * FROM live_costs ORDER BY job_id").equals(before)
    later = at(AT) + timedelta(days=SETTINGS.keep_days, seconds=1)
    # Long after the data's end: only a data age as long keeps the costs known.
    done = compute(wh, later, dataclasses.replace(SETTINGS, max_data_age_s=2 * SETTINGS.keep_days * 86400))
    assert done.deleted == 3
    assert wh.query("SELECT DISTINCT computed_at FROM live_costs")["computed_at"].to_list() == [later]
    assert wh.query("SELECT computed_at FROM live_cost_computations")["computed_at"].to_list() == [later]
    latest = top(wh.con, 10)
    assert latest["computed_at"].unique().to_list() == [later]
    assert latest["job_id"].to_list() == ["R1", "L1", "R2", "R3"], "known costs first, costliest first"


def test_recomputing_an_instant_after_late_data_drops_a_job_that_had_ended(wh: Warehouse, sc: Scenario) -> None:
    build(sc)
    sc.analyze()
    compute(wh, at(AT), SETTINGS)
    # the collector learns late that R3 ended before AT
    sc.run("R3", 1, 1, "b", 9500, 9800, "completed")
    sc.load()
    assert compute(wh, at(AT), SETTINGS).jobs == 2
    assert wh.query("SELECT job_id FROM live_costs ORDER BY job_id")["job_id"].to_list() == ["R1", "R2"]


def test_a_computation_with_no_running_job_empties_the_latest(wh: Warehouse, sc: Scenario) -> None:
    build(sc)
    sc.analyze()
    compute(wh, at(AT), SETTINGS)
    for job_id, run, gpus, pool, start in (("R1", 2, 8, "a", 1300), ("R2", 1, 2, "a", 7000), ("R3", 1, 1, "b", 9500),
                                           ("L1", 1, 4, "a", 10_001)):
        sc.run(job_id, run, gpus, pool, start, 10_500, "completed")
    sc.load()
    assert compute(wh, at(20_000), SETTINGS).jobs == 0
    assert top(wh.con, 10).is_empty(), "the jobs of an earlier computation no longer run"
    assert wh.query("SELECT count(*) AS n FROM live_costs")["n"][0] == 3, "their history stays"


def test_data_that_ended_make_costs_unknown_instead_of_ever_larger_whenever_they_were_loaded(
    wh: Warehouse, sc: Scenario
) -> None:
    """Freshness is how far the source's data reach, its newest record (L1's start at 10 001 s) or the cursor
    of a live read, never when the rows were loaded (today, weeks after them)."""
    build(sc)
    sc.analyze()
    data_end = at(10_001)

    def r1(moment: datetime) -> dict[str, Any]:
        compute(wh, moment, SETTINGS)
        return wh.query("SELECT * FROM live_costs WHERE computed_at = $t AND job_id = 'R1'", {"t": moment}).row(
            0, named=True)

    fresh = r1(data_end + timedelta(seconds=SETTINGS.max_data_age_s - 60))
    assert fresh["at_risk_s"] is not None and fresh["cost_gpu_s"] is not None and fresh["unknown"] is None
    late = data_end + timedelta(seconds=SETTINGS.max_data_age_s + 60)
    stale = r1(late)
    assert stale["at_risk_s"] is None and stale["cost_gpu_s"] is None and stale["near_completion_share"] is None
    assert "the scheduler's data end at 2026-11-02 10:46 UTC" in stale["unknown"]
    # what the job's history says stays known
    assert (stale["expected_warmup_s"], stale["expected_requeue_s"]) == (fresh["expected_warmup_s"],
                                                                         fresh["expected_requeue_s"])
    # A live read of the scheduler reported (nothing new) up to its cursor, sacct's window end: fresh again.
    wh.load_batch(Batch(source="test", watermarks=[Watermark("test", "c1", "sacct", (late - timedelta(
        minutes=5)).isoformat())]))
    assert r1(late)["cost_gpu_s"] is not None
    # The source's other cluster, or another source's read, says nothing of it.
    wh.load_batch(Batch(source="other", watermarks=[Watermark("other", "c1", "sacct", (late + timedelta(
        days=9)).isoformat()), Watermark("test", "c2", "sacct", (late + timedelta(days=9)).isoformat())]))
    assert r1(late + timedelta(hours=2))["cost_gpu_s"] is None


def test_the_live_at_risk_is_the_ledgers_lost_progress(wh: Warehouse, sc: Scenario) -> None:
    """One rule: a second before each preemption of the ledger's ground-truth scenario, the live cost's
    time at risk is the ledger's lost progress less that second (measured, assumed) or the same (declared)."""
    from test_ledger import build as build_ledger

    build_ledger(sc)
    sc.analyze()
    ledger = wh.query("SELECT victim_job_id, victim_run, time, basis, lost_s FROM preemption_ledger")
    assert sorted(ledger["basis"].unique().to_list()) == ["assumed", "checkpoint", "declared"]
    for p in ledger.iter_rows(named=True):
        moment = p["time"] - timedelta(seconds=1)
        compute(wh, moment, SETTINGS)
        row = wh.query(
            "SELECT run, basis, at_risk_s FROM live_costs WHERE job_id = $j AND computed_at = $t",
            {"j": p["victim_job_id"], "t": moment},
        ).row(0, named=True)
        assert row["run"] == p["victim_run"]
        assert row["basis"] == p["basis"]
        expected = p["lost_s"] if p["basis"] == "declared" else p["lost_s"] - 1
        assert row["at_risk_s"] == pytest.approx(expected), p


def test_the_command_stores_prints_and_recomputes_the_same(
    wh: Warehouse, sc: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    build(sc)
    sc.analyze()
    path = wh.path
    wh.close()
    when = at(AT).isoformat()
    argv = ["--warehouse", path, "cost", "--at", when]
    assert main([*argv, "--json", "--top", "2"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["computed_at"] == when
    assert [(j["job_id"], j["cost_gpu_s"]) for j in answer["jobs"]] == [("R1", 8 * 1350.0), ("R2", None)]
    assert answer["jobs"][1]["unknown"].startswith("requeue wait:")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "3 running job(s), 2 of unknown cost" in out
    assert "R1" in out and "3.0" in out, "R1's 10 800 GPU-s as GPU-hours"
    with Warehouse(path) as again:
        assert again.query("SELECT count(*) AS n FROM live_costs")["n"][0] == 3, "the same instant: the same rows"


def test_the_command_before_any_analyze_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--warehouse", str(tmp_path / "w.duckdb"), "cost"]) == 2
    err = capsys.readouterr().err
    assert "preemptlens analyze" in err and "Traceback" not in err


def test_the_command_computes_at_the_data_s_end_when_the_data_ended_earlier(
    wh: Warehouse, sc: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rows were loaded just now, but their newest record is L1's start at 10 001 s, weeks ago: the wall
    clock would find every job's progress at risk unknown (or, judged by the load time, weeks of it)."""
    build(sc)
    sc.analyze()
    path = wh.path
    wh.close()
    assert main(["--warehouse", path, "cost", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["computed_at"] == at(10_001).isoformat()
    assert "the data end at 2026-11-02 10:46:41 UTC" in answer["note"]
    assert {j["job_id"]: j["computed_at"] for j in answer["jobs"]} == dict.fromkeys(
        ("R1", "L1", "R2", "R3"), at(10_001).isoformat())
    assert main(["--warehouse", path, "cost"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("the data end at 2026-11-02 10:46:41 UTC") and "computed at the data's end" in out
    assert "live cost at 2026-11-02 10:46:41 UTC: 4 running job(s)" in out
    # --at now is the wall clock, where the data say nothing of what runs
    assert main(["--warehouse", path, "cost", "--at", "now", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert "note" not in answer and answer["jobs"] and all(j["cost_gpu_s"] is None for j in answer["jobs"])


def test_the_command_prints_the_rows_of_its_instant_not_of_a_later_computation(
    wh: Warehouse, sc: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    build(sc)
    sc.analyze()
    compute(wh, at(10_002), SETTINGS)  # L1 runs by then
    path = wh.path
    wh.close()
    assert main(["--warehouse", path, "cost", "--at", at(AT).isoformat(), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [(j["job_id"], j["computed_at"]) for j in answer["jobs"]] == [
        (job, at(AT).isoformat()) for job in ("R1", "R2", "R3")]


def test_an_action_reads_the_computation_of_its_instant_and_says_why_no_job_is_eligible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R1 (8 GPUs) has nothing saved in its second run until 9 000 s: at 5 000 s a preemption would throw away
    8 x (3 700 s at risk + 50 s warm-up + 300 s requeue) = 9.0 GPU-h, above kueue_boost's 8 GPU-h; at 10 000 s
    8 x 1 350 s = 3.0 GPU-h. An action run as of 5 060 s reads 5 000 s's computation, not the later one."""
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        sc = Scenario(wh)
        build(sc)
        for table, rows in sc.rows.items():
            wh.load(table, pl.DataFrame(rows, infer_schema_length=None), "kubernetes")
        sc.rows.clear()
        sc.analyze()
        for moment in (5000, AT):
            compute(wh, at(moment), SETTINGS)
    toml = tmp_path / "preemptlens.toml"
    toml.write_text("[kueue_boost]\nenabled = true\n")

    def act(seconds: float) -> str:
        now = (at(seconds)).isoformat()
        assert main(["--warehouse", str(path), "--config", str(toml), "act", "--now", now]) == 0
        return capsys.readouterr().out

    assert act(5060).startswith("kueue_boost (dry-run): 1 applied")
    with Warehouse(path) as wh:
        assert wh.query("SELECT job_id, cost_gpu_s FROM actions").rows() == [("R1", 8 * 4050.0)]
    out = act(AT + 60)
    assert "no job is eligible: of the 3 job(s) in the live costs computed at 2026-11-02 10:46 UTC" in out
    assert "2 of unknown live cost" in out
    out = act(AT + 7200)
    assert "3 computed more than kueue_boost.stale_after_s (30 min) before 2026-11-02 12:46 UTC" in out
    assert "`--now 2026-11-02T10:46:40Z` evaluates as of that computation" in out
    assert "no live cost was computed at or before 2026-11-02 09:00 UTC" in act(3600)


# The Preemptions page's victim costs, from a hand-made live-cost history of pool a:
# (computed at, job, GPUs, preemptible, cost GPU-s or None)
HISTORY = [
    (3000, "V", 4, True, 900.0), (3000, "O1", 4, True, 100.0),
    (4000, "V", 4, True, 1000.0), (4000, "O1", 4, True, 500.0), (4000, "O2", 2, True, 100.0),
    (4000, "O3", 8, False, 10.0), (4000, "O4", 4, True, 50.0), (4000, "W", 4, True, 300.0),
    (4000, "Y", 8, True, 2000.0), (4000, "Z", 8, True, None),
    (7500, "X", 2, True, 5.0),
]


def build_history(sc: Scenario) -> None:
    # victims: V at 5000 s, Y at 5200 s, W at 6000 s, X at 7000 s
    for job_id, gpus, end, state in (("V", 4, 5000, "preempted"), ("Y", 8, 5200, "preempted"),
                                     ("W", 4, 6000, "preempted"), ("X", 2, 7000, "preempted"),
                                     ("O1", 4, 8000, "completed"), ("O2", 2, 8000, "completed"),
                                     ("O3", 8, 8000, "completed"), ("O4", 4, 4500, "completed"),
                                     ("Z", 8, 5500, "completed")):
        tier = "high" if job_id == "O3" else "low"
        sc.job(job_id, tier, gpus, "a", -60)
        sc.run(job_id, 1, gpus, "a", 0, end, state)


def test_victims_live_cost_and_whether_a_cheaper_victim_was_running(wh: Warehouse, sc: Scenario) -> None:
    build_history(sc)
    sc.load()
    for t, job_id, gpus, preemptible, cost in HISTORY:
        wh.con.execute(
            "INSERT INTO live_costs (cluster, job_id, run, pool, team, preemptible, gpus, computed_at, cost_gpu_s, "
            "basis, unknown) VALUES ('c1', $j, 1, 'a', $team, $p, $g, $t, $c, 'checkpoint', $u)",
            {"j": job_id, "team": "team-" + job_id, "p": preemptible, "g": gpus, "t": at(t), "c": cost,
             "u": None if cost is not None else "requeue wait: none"},
        )
    sc.analyze()
    rows = {r["victim_job_id"]: r for r in sc.view("preemption_live_costs", "time").iter_rows(named=True)}
    assert sorted(rows) == ["V", "W", "X", "Y"]

    v = rows["V"]
    # its latest row at or before 5000 s is 4000 s's; O4 (cheaper) had ended, O2 has fewer GPUs, O3 is protected
    assert (v["victim_cost_computed_at"], v["victim_cost_gpu_s"]) == (at(4000), 1000.0)
    assert v["cheaper_victim_running"] is True
    assert (v["cheaper_job_id"], v["cheaper_team"], v["cheaper_cost_gpu_s"], v["cheaper_gpus"]) == (
        "W", "team-W", 300.0, 4)

    w = rows["W"]
    # at 6000 s V had been preempted and Z had ended: O1 (500) and Y (2000) cost more
    assert (w["victim_cost_gpu_s"], w["cheaper_victim_running"], w["cheaper_job_id"]) == (300.0, False, None)

    x = rows["X"]
    # its only row is from after its preemption
    assert x["victim_cost_gpu_s"] is None and x["cheaper_victim_running"] is None
    assert x["victim_cost_unknown"] == "no live cost computed for this run before the preemption"

    y = rows["Y"]
    # the only preemptible job as large as Y (Z) had an unknown cost: unknown, not "no"
    assert (y["victim_cost_gpu_s"], y["cheaper_victim_running"]) == (2000.0, None)
