"""Loss coverage and goodput against a simulated cluster's truth and against hand-built clusters.

The simulator's engine knows every run's warm-up, work, checkpoints and end; the views see only the raw
tables. Truth here is computed from the engine's runs, independently of the SQL: goodput is the work each
run kept (from the end of its warm-up to its last checkpoint when it was preempted or failed, to its end
otherwise), never "allocated minus badput".
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from analytics_scenario import Scenario, analysed, at, simulated_and_analysed

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import DEMO, PoolSpec, SimConfig, simulate
from preemptlens.analytics.simulator.engine import Outcome
from preemptlens.warehouse import Warehouse

DAY = 86400.0
# Nine days from a Monday: two ISO weeks, so pieces are cut at day and week boundaries. Every job checkpoints
# (its saves timed, ending at each checkpoint), nobody hoards (idle hoarding is checked by hand below), a few
# first runs fail. Greedy backfill: with reservations (the engine's default) this seed has a restart of job
# 100797 preempted after its warm-up but before its first progress report, which the view splits wrongly
# (`test_a_restart_preempted_before_its_first_report_is_split_at_its_warm_up`, expected to fail until it does).
SIM = SimConfig(
    cluster="goodput",
    start=datetime(2026, 10, 5, tzinfo=UTC),
    days=9.0,
    pools=(PoolSpec("a100", nodes=6), PoolSpec("h100", nodes=4)),
    workload=dataclasses.replace(
        DEMO.workload, seed=5, load=1.1, hoarding_share=0.0, checkpoint_share=1.0, fail_share=0.05
    ),
    policy=dataclasses.replace(DEMO.policy, backfill="greedy"),
)
PARTS = ("allocated", "preemption", "warmup", "failure", "save", "goodput")
COLUMNS = {
    "allocated": "allocated_gpu_s",
    "preemption": "badput_preemption_gpu_s",
    "warmup": "badput_warmup_gpu_s",
    "failure": "badput_failure_gpu_s",
    "save": "badput_checkpoint_save_gpu_s",
    "goodput": "goodput_gpu_s",
}


@pytest.fixture(scope="module")
def sim_wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Warehouse, Outcome]]:
    outcome = simulate(SIM).outcome
    with simulated_and_analysed(tmp_path_factory.mktemp("goodput") / "w.duckdb", SIM) as wh:
        yield wh, outcome


def _windows(period: str, a: float, b: float) -> Iterator[tuple[datetime, float]]:
    """(window start, seconds of [a, b) inside it) for each day or ISO week [a, b) touches."""
    step = DAY if period == "day" else 7 * DAY
    # SIM starts on a Monday at 00:00, so windows are multiples of the step from it
    k = int(a // step)
    while k * step < b:
        lo, hi = max(a, k * step), min(b, (k + 1) * step)
        if hi > lo:
            yield SIM.start + timedelta(seconds=k * step), hi - lo
        k += 1


def truth(out: Outcome, data_end_s: float) -> dict[tuple[str, str, str, datetime], dict[str, float]]:
    """Per (level, key, period, window start): allocated, lost to preemption and failure, warm-up and goodput
    GPU-seconds from the engine's runs."""
    cells: dict[tuple[str, str, str, datetime], dict[str, float]] = defaultdict(lambda: dict.fromkeys(PARTS, 0.0))
    for run in out.runs:
        if run.start_s is None:
            continue
        job = out.jobs[run.job]
        stop = data_end_s if run.end_s is None else run.end_s
        work_start = min(run.warmup_end_s, stop) if run.run > 1 else run.start_s
        saved = [t for t, _ in run.checkpoints if t <= stop]
        last = saved[-1] if saved else None
        spans = {"allocated": (run.start_s, stop), "warmup": (run.start_s, work_start)}
        if run.state in ("preempted", "failed"):
            kept_until = work_start if last is None else last
            spans["preemption" if run.state == "preempted" else "failure"] = (max(kept_until, work_start), stop)
        else:
            kept_until = stop
        spans["goodput"] = (work_start, kept_until)
        pieces = [(part, a, b, 1.0) for part, (a, b) in spans.items()]
        for t in saved:
            if not (run.final_checkpoint and t == run.signal_s):
                # a save ends at its checkpoint, inside the work the run kept: badput, not goodput
                pieces += [("save", max(t - job.save_s, work_start), t, 1.0),
                           ("goodput", max(t - job.save_s, work_start), t, -1.0)]
        for part, a, b, sign in pieces:
            for period in ("day", "week"):
                for window, seconds in _windows(period, a, b):
                    for level, key in (("cluster", ""), ("pool", job.pool), ("team", job.team or "")):
                        cells[(level, key, period, window)][part] += sign * job.gpus * seconds
    return cells


def test_goodput_and_its_badput_split_match_the_engine(sim_wh: tuple[Warehouse, Outcome]) -> None:
    _match_the_engine(*sim_wh)


@pytest.mark.xfail(strict=True, reason="goodput.sql takes the ledger's warmup_s 0 (the restart's own loss holds its "
                   "warm-up) for a measured 0 s warm-up, where the restart got past its warm-up before it was "
                   "preempted and no progress report says so: its warm-up is counted as lost to preemption")
def test_a_restart_preempted_before_its_first_report_is_split_at_its_warm_up(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The same cluster with reservations: job 100797's run 2 (1 GPU, warm-up 564 s) is preempted 573 s after its
    # warm-up, before its first progress report (every 600 s); team recsys's 2026-10-11 splits 564 GPU-s wrongly.
    sim = dataclasses.replace(SIM, policy=DEMO.policy)
    with simulated_and_analysed(tmp_path_factory.mktemp("goodput_reserve") / "w.duckdb", sim) as wh:
        _match_the_engine(wh, simulate(sim).outcome)


def _match_the_engine(wh: Warehouse, out: Outcome) -> None:
    data_end = wh.query("SELECT max(data_end) AS e FROM stg_runs")["e"][0]
    expected = truth(out, (data_end - SIM.start).total_seconds())
    rows = wh.query("SELECT * FROM goodput").to_dicts()
    assert len(rows) == len(expected)
    compared = {part: 0 for part in PARTS}
    bounded = 0
    for row in rows:
        key = row["pool"] if row["level"] == "pool" else row["team"] if row["level"] == "team" else ""
        want = expected[(row["level"], key, row["period"], row["window_start"])]
        # microsecond timestamps; the warm-up is recovered from progress reports exactly here
        tolerance = 1e-9 * want["allocated"] + 1e-3
        for part in PARTS:
            got = row[COLUMNS[part]]
            if got is None:
                continue
            compared[part] += 1
            assert got == pytest.approx(want[part], abs=tolerance), (part, row)
        # nothing is idle: no job hoards
        assert row["badput_idle_gpu_s"] == 0
        # the bounds hold the truth, and are it once every part is known
        assert row["goodput_at_least_gpu_s"] - tolerance <= want["goodput"] <= row["goodput_at_most_gpu_s"] + tolerance
        if row["goodput_gpu_s"] is not None:
            assert row["goodput_at_most_gpu_s"] == pytest.approx(want["goodput"], abs=tolerance)
            assert row["goodput_at_least_gpu_s"] == pytest.approx(want["goodput"], abs=tolerance)
        else:
            bounded += row["goodput_at_least_gpu_s"] > 0
        assert row["allocated_gpu_s"] > 0
    assert compared["goodput"] > 20 and compared["preemption"] > 20 and compared["failure"] > 5
    assert bounded > 5, "cells with an unknown part still have a lower bound above 0"
    assert compared["save"] == len(rows)
    assert compared["allocated"] == len(rows)


def test_an_unknown_part_is_named_and_leaves_goodput_unknown(sim_wh: tuple[Warehouse, Outcome]) -> None:
    wh, _ = sim_wh
    unknown = wh.query(
        "SELECT * FROM goodput WHERE level = 'cluster' AND period = 'week' AND goodput_gpu_s IS NULL"
    ).to_dicts()
    # a run that failed before its job wrote any checkpoint: nothing says what the failure threw away
    assert unknown, "the scenario should have a failure without checkpoints"
    for row in unknown:
        assert row["missing"]
        if row["badput_preemption_gpu_s"] is None:
            assert row["unmeasured_preemptions"] > 0 and "without a measured loss" in row["missing"]
        if row["badput_warmup_gpu_s"] is None:
            assert row["unmeasured_warmups"] > 0 and "without a measured warm-up" in row["missing"]
        if row["badput_failure_gpu_s"] is None:
            assert row["unmeasured_failures"] > 0 and "failed runs without a measured loss" in row["missing"]
    # unmeasured: a declared or assumed loss, or a loss in a restart whose warm-up (where its work began) is not
    declared = wh.query(
        "SELECT date_trunc('week', l.time) AS w, count(*) AS n FROM preemption_ledger AS l "
        "LEFT JOIN preemption_ledger AS b ON b.victim_job_id = l.victim_job_id AND b.restart_run = l.victim_run "
        "WHERE NOT is_measured(l.basis) OR (b.victim_job_id IS NOT NULL AND b.warmup_s IS NULL) GROUP BY ALL"
    ).rows()
    by_week = {r["window_start"]: r["unmeasured_preemptions"] for r in unknown}
    assert {w: n for w, n in declared} == {w: n for w, n in by_week.items() if n}


def test_loss_coverage_counts_measured_losses_exactly(sim_wh: tuple[Warehouse, Outcome]) -> None:
    wh, out = sim_wh
    truth_rows = [p for p in out.preemptions() if p.time_s < out.horizon_s]
    # the truth: a victim whose job wrote a checkpoint before the data's end has its loss measured, and so has one
    # that restarted (its restart reports the step it resumed from: rollback)
    wrote = {out.jobs[r.job].job_id for r in out.runs if any(t < SIM.horizon_s for t, _ in r.checkpoints)
             and r.start_s is not None}
    measured = [p for p in truth_rows if out.jobs[p.victim].job_id in wrote or p.restart_s is not None]
    cov = wh.query("SELECT * FROM loss_coverage WHERE level = 'cluster' AND period = 'week'")
    assert int(cov["preemptions"].sum()) == len(truth_rows)
    assert int(cov["measured_preemptions"].sum()) == len(measured) > 0
    assert float(cov["measured_lost_gpu_s"].sum()) == pytest.approx(sum(p.lost_gpu_s for p in measured))
    assert float(cov["lost_gpu_s"].sum()) == pytest.approx(sum(p.lost_gpu_s for p in truth_rows))
    teams = wh.query("SELECT sum(measured_preemptions) AS m FROM loss_coverage WHERE level = 'team' "
                     "AND period = 'day'")["m"][0]
    assert teams == len(measured)


H = 3600.0


def hand_built(sc: Scenario) -> None:
    """Pool p, 4 GPUs, one day. Job v (2 GPUs, team t, checkpoints with timed saves) runs 0-3 h, checkpoints at
    1 h (save 60 s) and 2 h (save 120 s), is preempted at 3 h by job x and restarts at 3.5 h; progress reports
    put its warm-up at 600 s; it completes at 6 h. One of v's GPUs is idle 2.25-3 h (a hoarding stretch inside
    the work it loses). Job f (1 GPU, team u) checkpoints at 1 h (save 30 s) and fails at 1.5 h."""
    sc.pool("p", 4)
    sc.job("v", "low", 2, "p", 0, team="t")
    sc.run("v", 1, 2, "p", 0, 3 * H, "preempted", preemptor_job_id="x", reason="priority")
    sc.run("v", 2, 2, "p", 3.5 * H, 6 * H, "completed")
    sc.job("x", "high", 2, "p", 0, team="hi")
    sc.run("x", 1, 2, "p", 3 * H, 3.5 * H, "completed")
    sc.add("checkpoints", job_id="v", run=1, time=at(1 * H), kind="checkpoint", step=100.0, save_s=60.0)
    sc.add("checkpoints", job_id="v", run=1, time=at(2 * H), kind="checkpoint", step=200.0, save_s=120.0)
    # restored at step 200, 1 step per 36 s: steps 210 and 220 at 3.5 h + 600 s + 360 s and + 720 s
    sc.checkpoint("v", 2, 3.5 * H + 960, 210.0, kind="progress")
    sc.checkpoint("v", 2, 3.5 * H + 1320, 220.0, kind="progress")
    sc.job("f", "normal", 1, "p", 0, team="u")
    sc.run("f", 1, 1, "p", 0, 1.5 * H, "failed")
    sc.add("checkpoints", job_id="f", run=1, time=at(1 * H), kind="checkpoint", step=10.0, save_s=30.0)
    # v's GPUs on host h1 (GPU 0 idle 2.25-3 h), f's on h2, x's on h1 after the preemption; samples every minute
    sc.samples("v", "h1", 0, 0, 2.25 * H, busy=0.9)
    sc.samples("v", "h1", 0, 2.25 * H, 3 * H, busy=0.0)
    sc.samples("v", "h1", 1, 0, 3 * H, busy=0.9)
    sc.samples("f", "h2", 0, 0, 1.5 * H, busy=0.9)


def test_goodput_split_by_hand(tmp_path: Path) -> None:
    with analysed(tmp_path, hand_built) as sc:
        rows = {
            r["team"]: r
            for r in sc.view("goodput", "team").filter(
                (pl.col("level") == "team") & (pl.col("period") == "day")
            ).to_dicts()
        }
        v = rows["t"]
        # allocated: 2 x 3 h + 2 x 2.5 h
        assert v["allocated_gpu_s"] == pytest.approx(2 * 3 * H + 2 * 2.5 * H)
        assert v["badput_idle_gpu_s"] == pytest.approx(0.75 * H)
        # saves end at their checkpoints: 2 x (60 + 120) s
        assert v["badput_checkpoint_save_gpu_s"] == pytest.approx(2 * 180)
        # lost since the 2 h checkpoint: 2 x 1 h, less the idle 0.75 h of one GPU inside it
        assert v["badput_preemption_gpu_s"] == pytest.approx(2 * H - 0.75 * H)
        assert v["badput_warmup_gpu_s"] == pytest.approx(2 * 600)
        assert v["badput_failure_gpu_s"] == 0
        assert v["goodput_gpu_s"] == pytest.approx(11 * H - 0.75 * H - 360 - 1.25 * H - 1200)
        assert v["goodput_share"] == pytest.approx(v["goodput_gpu_s"] / (11 * H))
        assert v["missing"] is None
        f = rows["u"]
        # f failed half an hour after its last checkpoint (saved in 30 s before it)
        assert (f["badput_failure_gpu_s"], f["badput_checkpoint_save_gpu_s"]) == (pytest.approx(0.5 * H), 30)
        assert f["goodput_gpu_s"] == pytest.approx(1.5 * H - 0.5 * H - 30)
        cluster = sc.view("goodput", "period").filter(
            (pl.col("level") == "cluster") & (pl.col("period") == "week")
        ).row(0, named=True)
        parts = [c for c in cluster if c.startswith("badput_") and c.endswith("_gpu_s")]
        assert cluster["goodput_gpu_s"] == pytest.approx(
            cluster["allocated_gpu_s"] - sum(cluster[c] for c in parts)
        )
        assert cluster["allocated_gpu_s"] == pytest.approx(11 * H + 1.5 * H + 1 * H)
        assert cluster["goodput_at_most_gpu_s"] == pytest.approx(cluster["goodput_gpu_s"])
        assert cluster["goodput_at_least_gpu_s"] == pytest.approx(cluster["goodput_gpu_s"])
        assert cluster["unknown_at_most_gpu_s"] == 0
        cov = sc.view("loss_coverage", "period").filter(
            (pl.col("level") == "cluster") & (pl.col("period") == "day")
        ).row(0, named=True)
        assert (cov["preemptions"], cov["measured_preemptions"], cov["measured_share"]) == (1, 1, 1.0)
        assert cov["missing"] is None


def test_an_untimed_save_and_a_cluster_without_checkpoint_data_are_unknown(tmp_path: Path) -> None:
    def build(sc: Scenario) -> None:
        hand_built(sc)
        # a stream that gives checkpoint times but no save time
        sc.add("checkpoints", job_id="v", run=2, time=at(5 * H), kind="checkpoint", step=900.0)
        # another cluster, nothing collected: its victim's loss is assumed
        sc.rows["jobs"].append({**sc.rows["jobs"][0], "cluster": "c2"})
        sc.rows["job_runs"].append({**sc.rows["job_runs"][0], "cluster": "c2", "preemptor_job_id": None})

    with analysed(tmp_path, build) as sc:
        rows = sc.view("goodput", "cluster").filter(
            (pl.col("level") == "cluster") & (pl.col("period") == "week")
        ).to_dicts()
        c1, c2 = rows
        assert c1["badput_checkpoint_save_gpu_s"] is None and c1["untimed_saves"] == 1
        assert "checkpoints without a save time" in c1["missing"]
        assert c1["goodput_gpu_s"] is None and c1["goodput_share"] is None
        # the other parts stay known, and bound the goodput from above: v's idle, saves, loss and warm-up, f's saves
        # and failure (the untimed save adds an unknown amount)
        assert c1["badput_preemption_gpu_s"] == pytest.approx(1.25 * H)
        assert c1["goodput_at_most_gpu_s"] == pytest.approx(13.5 * H - 0.75 * H - 360 - 1.25 * H - 1200 - 30 - 0.5 * H)
        # and from below: the untimed save took at most all of v's second run from the end of its warm-up (3.5 h
        # + 600 s) to the checkpoint (5 h), on its 2 GPUs
        assert c1["unknown_at_most_gpu_s"] == pytest.approx(2 * (1.5 * H - 600))
        assert c1["goodput_at_least_gpu_s"] == pytest.approx(c1["goodput_at_most_gpu_s"] - 2 * (1.5 * H - 600))
        assert c2["badput_preemption_gpu_s"] is None and c2["unmeasured_preemptions"] == 1
        assert c2["badput_checkpoint_save_gpu_s"] is None
        assert c2["badput_idle_gpu_s"] is None
        # without GPU samples idle hoarding may be any part of the allocation: no lower bound above 0
        assert c2["unknown_at_most_gpu_s"] is None and c2["goodput_at_least_gpu_s"] == 0
        assert c2["goodput_at_most_gpu_s"] > 0
        for text in ("without a measured loss", "enable `preemptlens collect checkpoints`",
                     "no GPU samples: idle hoarding unknown"):
            assert text in c2["missing"]
        cov = {r["cluster"]: r for r in sc.view("loss_coverage", "cluster").filter(
            (pl.col("level") == "cluster") & (pl.col("period") == "week")).to_dicts()}
        assert cov["c2"]["measured_share"] == 0 and cov["c2"]["assumed_preemptions"] == 1
        assert "enable `preemptlens collect checkpoints`" in cov["c2"]["missing"]


def test_a_simulated_cluster_whose_checkpoints_were_not_collected_stays_unknown(tmp_path: Path) -> None:
    """The same cluster for three days with every table but checkpoints loaded, as on a real cluster before
    `preemptlens collect checkpoints`: its victims did checkpoint, so nothing may read as "no"."""
    sim = dataclasses.replace(SIM, cluster="uncollected", days=3.0)
    frames = simulate(sim).frames
    with Warehouse(tmp_path / "w.duckdb") as wh:
        for table in ("pools", "jobs", "job_runs"):
            wh.load(table, frames[table], "simulator")
        analyze(wh, AnalyticsSettings())
        sources = wh.query("SELECT * FROM progress_sources").row(0, named=True)
        assert sources["collected"] is False and "collect checkpoints" in sources["missing"]
        cov = wh.query("SELECT * FROM loss_coverage WHERE level = 'cluster' AND period = 'week'").row(0, named=True)
        assert cov["preemptions"] > 5 and cov["measured_preemptions"] == 0
        assert cov["missing"] == sources["missing"]
        good = wh.query("SELECT * FROM goodput WHERE level = 'cluster'").to_dicts()
        assert all(g["goodput_gpu_s"] is None and g["badput_checkpoint_save_gpu_s"] is None for g in good)
        assert all(sources["missing"] in g["missing"] for g in good)
        card = wh.query("SELECT answer, missing FROM readiness_scorecard WHERE question_no = 3").row(0, named=True)
        assert card["answer"] is None and "collect checkpoints" in card["missing"]


def test_failure_badput_split_by_cause_of_end(tmp_path: Path) -> None:
    """The failure badput split by run_ends' cause: f crashes (hand_built: half an hour lost); n's node fails, t
    reaches its time limit and g fails after an hour of silence (a hang), each an hour after its last checkpoint."""
    def build(sc: Scenario) -> None:
        hand_built(sc)
        for job, state in (("n", "node_fail"), ("t", "timeout"), ("g", "failed")):
            sc.job(job, "normal", 1, "p", 6 * H, team="u")
            sc.run(job, 1, 1, "p", 6 * H, 8 * H, state)
            sc.add("checkpoints", job_id=job, run=1, time=at(7 * H), kind="checkpoint", step=10.0, save_s=30.0)
        for k in range(1, 61):  # g reports every minute until its checkpoint, then nothing
            sc.checkpoint("g", 1, 6 * H + 60 * k, float(k), kind="progress")
        for k in range(1, 120):  # n and t report to their ends
            for job in ("n", "t"):
                sc.checkpoint(job, 1, 6 * H + 60 * k, float(k), kind="progress")

    with analysed(tmp_path, build) as sc:
        causes = dict(sc.wh.query("SELECT job_id, cause FROM run_ends WHERE job_id IN ('f', 'n', 't', 'g')").rows())
        assert causes == {"f": "crash", "n": "node_failure", "t": "time_limit", "g": "hang"}
        u = sc.view("goodput", "team").filter(
            (pl.col("level") == "team") & (pl.col("period") == "day") & (pl.col("team") == "u")).row(0, named=True)
        split = {c: u[f"failure_{c}_gpu_s"] for c in ("crash", "node_failure", "time_limit", "hang")}
        assert split == {"crash": pytest.approx(0.5 * H), "node_failure": pytest.approx(H),
                         "time_limit": pytest.approx(H), "hang": pytest.approx(H)}
        assert u["badput_failure_gpu_s"] == pytest.approx(sum(split.values()))
        # the split is no further badput: the goodput is allocated less the badput parts, as before
        parts = [c for c in u if c.startswith("badput_") and c.endswith("_gpu_s")]
        assert u["goodput_gpu_s"] == pytest.approx(u["allocated_gpu_s"] - sum(u[c] for c in parts))
