"""Which run a preemption link binds to (docs/figures.md, section 1).

Hand-made layouts of one victim job whose preempted run is requeued and whose
next run then completes, fails, is cancelled or times out within the link
tolerance (120 s): only the run that was running at the link time is a
preemption. A property test over generated layouts checks the rule against a
plain reading of its sentence: one link, one preemption; one run, one row.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from analytics_scenario import T0, Scenario, at, default_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preemptlens.analytics.refresh import write_params
from preemptlens.analytics.views import VIEWS_DIR, _body
from preemptlens.warehouse import Warehouse

TOLERANCE = 120.0


def _victim(sc: Scenario) -> None:
    sc.pool("a", 8)
    sc.job("V", "low", 4, "a", -60)
    sc.job("P", "high", 4, "a", 990)
    sc.run("P", 1, 4, "a", 1001, 2000, "completed")


def _ledger(sc: Scenario) -> pl.DataFrame:
    sc.analyze()
    return sc.view("preemption_ledger", "victim_job_id, victim_run")


@pytest.mark.parametrize("then", ["completed", "failed", "cancelled", "timeout"])
def test_requeued_run_that_then_ends_within_the_tolerance_is_no_preemption(sc: Scenario, then: str) -> None:
    """The issue's case: the Slurm log names the preemptor, sacct marks the
    first run preempted, and the requeued run ends 35 s later."""
    _victim(sc)
    sc.run("V", 1, 4, "a", 0, 1000, "preempted")
    sc.run("V", 2, 4, "a", 1012, 1035, then, reason="BeginTime")
    sc.link("V", 1000.3, "P", "requeued")
    ledger = _ledger(sc)
    assert ledger.select("victim_job_id", "victim_run", "preemptor_job_id", "reason").rows() == [
        ("V", 1, "P", "requeued")]
    # The run's whole-second end is 1000 s; its link, 1000.3 s, is the kill (docs/figures.md, section 1).
    assert ledger["requeue_delay_s"][0] == pytest.approx(11.7)
    assert ledger["lost_gpu_s"][0] == pytest.approx(4 * 1000.3)
    assert ledger["repeat_victim"].to_list() == [False]


@pytest.mark.parametrize(
    ("first_end", "second_start", "second_end", "second_state"),
    [
        # The victim's end was recorded 100 s before the link (a slow kill); the
        # next run started after the link and ended only 10 s from it.
        pytest.param(900, 1005, 1010, "failed", id="running_at_its_time_not_a_later_one_ending_nearer"),
        # Both runs had started by the link time; the completed one ends nearer, but
        # the scheduler says the requeued one was stopped.
        pytest.param(980, 985, 995, "completed", id="scheduler_marked_run_not_a_completed_one"),
    ],
)
def test_link_binds_the_requeued_run_not_the_next_one_ending_nearer(
    sc: Scenario, first_end: float, second_start: float, second_end: float, second_state: str
) -> None:
    """A link at 1000 s with the requeued run 1 and the next run 2 both within the tolerance: run 1 is the
    preemption, whichever of the two ends nearer the link."""
    _victim(sc)
    sc.run("V", 1, 4, "a", 0, first_end, "requeued")
    sc.run("V", 2, 4, "a", second_start, second_end, second_state)
    sc.link("V", 1000, "P", "requeued")
    assert _ledger(sc).select("victim_run", "preemptor_job_id").rows() == [(1, "P")]


def test_completed_run_is_a_preemption_only_through_its_link(sc: Scenario) -> None:
    """A source that never marks runs (a killed job recorded as cancelled): the
    link alone makes it a preemption, and only that run."""
    _victim(sc)
    sc.run("V", 1, 4, "a", 0, 1000, "cancelled")
    sc.run("V", 2, 4, "a", 1030, 1060, "completed")
    sc.link("V", 1001, "P", "killed")
    assert _ledger(sc).select("victim_run", "preemptor_job_id", "reason").rows() == [(1, "P", "killed")]


def test_admin_requeue_without_a_link_is_no_preemption(sc: Scenario) -> None:
    """`scontrol requeue` ends the run as REQUEUED and writes no preemption line."""
    _victim(sc)
    sc.run("V", 1, 4, "a", 0, 1000, "requeued")
    sc.run("V", 2, 4, "a", 1012, 1035, "completed")
    assert _ledger(sc).height == 0


def test_one_preemption_reported_twice_is_one_row(sc: Scenario) -> None:
    """Two sources (or a repeated event) report the same preemption 2 s apart."""
    _victim(sc)
    sc.run("V", 1, 4, "a", 0, 1000, "preempted")
    sc.run("V", 2, 4, "a", 1012, 1035, "completed")
    sc.link("V", 1000, "P", "requeued")
    sc.link("V", 1002, None, "killed")
    assert _ledger(sc).select("victim_run", "preemptor_job_id", "reason").rows() == [(1, "P", "requeued")]


def test_workload_evicted_twice_in_one_minute(sc: Scenario) -> None:
    """Kueue: two evictions 40 s apart by two preemptors, then a short run that
    finishes. Each event binds to the admission it ended."""
    _victim(sc)
    sc.job("Q", "high", 4, "a", 1020)
    sc.run("Q", 1, 4, "a", 1040, 2000, "completed")
    sc.run("V", 1, 4, "a", 0, 1000, "preempted", preemptor_job_id="P")
    sc.run("V", 2, 4, "a", 1010, 1040, "preempted", preemptor_job_id="Q")
    sc.run("V", 3, 4, "a", 1060, 1090, "completed")
    sc.link("V", 1000, "P", "InClusterQueue")
    sc.link("V", 1040, "Q", "InClusterQueue")
    ledger = _ledger(sc)
    assert ledger.select("victim_run", "preemptor_job_id", "prior_job_preemptions").rows() == [
        (1, "P", 0), (2, "Q", 1)]
    assert ledger["requeue_delay_s"].to_list() == pytest.approx([10.0, 20.0])


def test_a_run_whose_start_was_lost_keeps_its_link_from_the_next_attempt(sc: Scenario) -> None:
    """A Workload evicted again before anyone saw it admitted: its run has an end
    but no start. It is a preemption all the same, whose costs that need the
    start are unknown; the next attempt, which started after the event and
    finished within the tolerance, is still no victim."""
    _victim(sc)
    sc.run("V", 1, 4, "a", 0, 1000, "preempted", preemptor_job_id="P")
    sc.add("job_runs", job_id="V", run=2, gpus=4, pool="a", start_time=None, end_time=at(1040),
           state="preempted", submit_time=None)
    sc.run("V", 3, 4, "a", 1050, 1100, "completed")
    sc.link("V", 1040, "P", "InClusterQueue")
    ledger = _ledger(sc)
    assert ledger.select("victim_run", "preemptor_job_id", "victim_gpus").rows() == [(1, "P", 4), (2, "P", 4)]
    assert ledger.select("run_start", "lost_gpu_s", "work_done_s").row(1) == (None, None, None)
    assert ledger["requeue_delay_s"].to_list() == pytest.approx([1050.0 - 1000.0, 10.0])


# -- property ----------------------------------------------------------------

_STATES = ("preempted", "requeued", "completed", "failed", "cancelled", "timeout")
_MARKED = ("preempted", "requeued")


@st.composite
def layouts(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two jobs, each a few consecutive runs with short gaps, and links near
    (or far from) their ends: many links fall within the tolerance of two runs."""
    runs: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for job in ("J1", "J2"):
        t = 0
        for run in range(1, draw(st.integers(1, 4)) + 1):
            t += draw(st.integers(0, 60))
            length = draw(st.integers(1, 200))
            runs.append({"job_id": job, "run": run, "start": t, "end": t + length,
                         "state": draw(st.sampled_from(_STATES))})
            t += length
        times = draw(st.lists(st.integers(-30, t + 150), max_size=4, unique=True))
        links += [{"job_id": job, "time": x} for x in times]
    return runs, links


def _bound(runs: list[dict[str, Any]], link: dict[str, Any]) -> tuple[str, int] | None:
    """The rule as docs/figures.md states it, read plainly."""
    candidates = [r for r in runs if r["job_id"] == link["job_id"] and r["start"] <= link["time"] + TOLERANCE
                  and abs(r["end"] - link["time"]) <= TOLERANCE]
    if not candidates:
        return None
    best = min(candidates, key=lambda r: (r["start"] > link["time"], r["state"] not in _MARKED,
                                          abs(r["end"] - link["time"]), r["run"]))
    return best["job_id"], best["run"]


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A warehouse with the two building blocks as views over the raw tables."""
    with Warehouse(Path(tmp_path_factory.mktemp("bind")) / "w.duckdb") as wh:
        write_params(wh, default_params(link_tolerance_s=TOLERANCE), {})
        for name in ("stg_job_runs", "stg_runs", "stg_preemptions"):
            wh.con.execute(f"CREATE VIEW {name} AS {_body((VIEWS_DIR / (name + '.sql')).read_text())}")
        wh.load("jobs", pl.DataFrame([
            {"cluster": "c1", "job_id": j, "tier": "low", "gpus": 1, "pool": "a", "submit_time": T0,
             "preemptible": True} for j in ("J1", "J2")]), "test")
        yield wh


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts())
def test_no_run_counted_twice_and_no_link_makes_two_preemptions(bare: Warehouse, layout: Any) -> None:
    runs, links = layout
    bare.con.execute("DELETE FROM job_runs")
    bare.con.execute("DELETE FROM preemption_links")
    bare.load("job_runs", pl.DataFrame([
        {"cluster": "c1", "job_id": r["job_id"], "run": r["run"], "gpus": 1, "pool": "a", "state": r["state"],
         "start_time": T0 + timedelta(seconds=r["start"]), "end_time": T0 + timedelta(seconds=r["end"])}
        for r in runs]), "test")
    if links:
        bare.load("preemption_links", pl.DataFrame([
            {"cluster": "c1", "victim_job_id": lk["job_id"], "time": T0 + timedelta(seconds=lk["time"]),
             "preemptor_job_id": f"P@{lk['time']}"} for lk in links]), "test")
    rows = bare.query("SELECT victim_job_id, victim_run, preemptor_job_id FROM stg_preemptions").rows()
    keys = [(job, run) for job, run, _ in rows]
    assert len(keys) == len(set(keys)), "a run counted twice"

    bound = {(lk["job_id"], lk["time"]): _bound(runs, lk) for lk in links}
    expected = {(r["job_id"], r["run"]) for r in runs if r["state"] == "preempted"} | {
        b for b in bound.values() if b is not None}
    assert set(keys) == expected
    # Runs the scheduler did not mark preempted are there only through links,
    # one per link at most.
    unmarked = [k for k in keys if next(r["state"] for r in runs if (r["job_id"], r["run"]) == k) != "preempted"]
    assert len(unmarked) <= sum(1 for b in bound.values() if b in unmarked)
    # Each row's preemptor is one of the links bound to it, the nearest.
    for job, run, preemptor in rows:
        mine = [t for (j, t), b in bound.items() if b == (job, run)]
        if mine:
            end = next(r["end"] for r in runs if (r["job_id"], r["run"]) == (job, run))
            assert preemptor == f"P@{min(mine, key=lambda t: (abs(end - t), t))}"
        else:
            assert preemptor is None
        # a link never names the victim of a run that started after it while its job had one running
        for t in mine:
            start = next(r["start"] for r in runs if (r["job_id"], r["run"]) == (job, run))
            running = [r for r in runs if r["job_id"] == job and r["start"] <= t <= r["end"]]
            assert start <= t or not running
