"""The rollback basis (docs/figures.md section 1): from progress reports alone, the step the next run resumed
from dates the checkpoint the restart restored, at the moment this run first reached that step.

Step reports count completed steps (a training log writes one when a step ends): the restart's first report is
one step past the step it resumed from; a restore row (a framework's "resumed from step N" line) is that step.
One victim run from 0 to 100 s, preempted; its restart at 120 s reports from 130 s on, one step a second. Each
case is the run's own reports and the restart's first reported step; the loss is checked against the moment
worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.warehouse import Warehouse

T = datetime(2026, 9, 1, tzinfo=UTC)


def _ledger(first_next: float, reports: list[tuple[float, float]], source: str = "log:custom",
            restored: tuple[float, float] | None = None) -> dict[str, object]:
    with Warehouse(":memory:") as wh:
        wh.load("jobs", pl.DataFrame({"cluster": ["c"], "job_id": ["j"], "tier": ["low"], "preemptible": [True],
                                      "gpus": [4], "submit_time": [T]}), "slurm")
        wh.load("job_runs", pl.DataFrame({
            "cluster": ["c", "c"], "job_id": ["j", "j"], "run": [1, 2], "gpus": [4, 4],
            "start_time": [T, T + timedelta(seconds=120)], "end_time": [T + timedelta(seconds=100), None],
            "state": ["preempted", "running"]}), "slurm")
        rows = [("c", "j", 1, T + timedelta(seconds=t), "progress", s, source) for t, s in reports]
        rows += [("c", "j", 2, T + timedelta(seconds=130 + k), "progress", first_next + k, source) for k in range(5)]
        if restored is not None:
            rows.append(("c", "j", 2, T + timedelta(seconds=restored[0]), "restore", restored[1], source))
        wh.load("checkpoints", pl.DataFrame(rows, schema=["cluster", "job_id", "run", "time", "kind", "step", "origin"],
                                            orient="row"), "checkpoints")
        analyze(wh, AnalyticsSettings())
        (row,) = wh.query(
            "SELECT basis, progress_source, lost_s, lost_gpu_s, warmup_s FROM preemption_ledger").to_dicts()
        return row


@pytest.mark.parametrize(
    ("first_next", "reports", "lost_s"),
    [
        # resumed from 50 (its first report says 51 steps done): step 50 was reached at 55 s
        (51.0, [(5 + s, float(s)) for s in range(1, 91)], 45.0),
        # between two reports (50 at 50 s, 60 at 60 s): 54 at 54 s
        (55.0, [(10 * k, 10.0 * k) for k in range(1, 10)], 46.0),
        # before the first report (20 at 20 s, 30 at 30 s, 1 step/s): 4 at 4 s
        (5.0, [(10 * k + 20, 10.0 * k + 20) for k in range(8)], 96.0),
        # ... but never before the run's start (step 0 would be at -15 s at this rate)
        (1.0, [(5 + 10 * k, 10.0 * k + 20) for k in range(9)], 100.0),
        # past the last report (80 at 80 s): saved after it, at 1 step/s not before the preemption: nothing lost
        (200.0, [(10 * k, 10.0 * k) for k in range(1, 9)], 0.0),
    ],
)
def test_rollback_loss_is_the_time_since_the_restart_step_was_first_reached(
    first_next: float, reports: list[tuple[float, float]], lost_s: float
) -> None:
    row = _ledger(first_next, reports)
    assert (row["basis"], row["progress_source"]) == ("rollback", "log:custom")
    assert row["lost_s"] == pytest.approx(lost_s)
    assert row["lost_gpu_s"] == pytest.approx(4 * lost_s)
    # the first step after the restart ended at 130 s, one step a second: it began at 129 s, 9 s after the start
    assert row["warmup_s"] == pytest.approx(9.0)


def test_a_restore_row_is_the_step_the_restart_resumed_from() -> None:
    """A restore (Megatron's "successfully loaded checkpoint ... at iteration 40") says the step itself, whatever
    the first step report after it says (reports every 10 steps here: the first says 51)."""
    row = _ledger(51.0, [(s, float(s)) for s in range(1, 91)], source="log:megatron", restored=(125.0, 40.0))
    assert (row["basis"], row["progress_source"]) == ("rollback", "log:megatron")
    assert row["lost_s"] == pytest.approx(60.0)


def test_without_a_restart_report_there_is_no_rollback() -> None:
    with Warehouse(":memory:") as wh:
        wh.load("jobs", pl.DataFrame({"cluster": ["c"], "job_id": ["j"], "tier": ["low"], "preemptible": [True],
                                      "gpus": [1], "submit_time": [T]}), "slurm")
        wh.load("job_runs", pl.DataFrame({"cluster": ["c"], "job_id": ["j"], "run": [1], "gpus": [1],
                                          "start_time": [T], "end_time": [T + timedelta(seconds=100)],
                                          "state": ["preempted"]}), "slurm")
        wh.load("checkpoints", pl.DataFrame({"cluster": ["c"], "job_id": ["j"], "run": [1],
                                             "time": [T + timedelta(seconds=50)], "kind": ["progress"],
                                             "step": [50.0]}), "checkpoints")
        analyze(wh, AnalyticsSettings())
        assert wh.query("SELECT basis, progress_source, lost_s FROM preemption_ledger").rows() == [
            ("assumed", None, 100.0)]
