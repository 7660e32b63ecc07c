"""The checkpoint collector's `prometheus` stream against a real Prometheus, backfilled with promtool.

A job's exporter (or a Pushgateway) reports its training step and the time of its last completed checkpoint,
labelled with the job as GPU samples are (`hpc_job`). Job 101 runs, saves at minute 20, is preempted at minute
30 and restarts at minute 40 from that checkpoint (step 120); job 102 reports only its step. The ledger reads
the checkpoint (basis `checkpoint`) for 101 and, from the step reports alone, the rollback for 102; a series
naming no recorded job is quarantined by its labels.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.checkpoints import CheckpointCollector
from preemptlens.config import Config
from preemptlens.warehouse import Warehouse
from tests.prometheus.conftest import PrometheusServer, backfill

CLUSTER = "c1"


def _t0() -> datetime:
    # Old enough to be backfilled below the head block, recent enough for the collector's lookback.
    return (datetime.now(UTC) - timedelta(hours=5)).replace(minute=0, second=0, microsecond=0)


def _openmetrics(t0: datetime, path: Path) -> None:
    lines = ["# TYPE train_step gauge"]
    base = t0.timestamp()
    # 101: one step every 10 s for 30 minutes (steps 0-179), then from minute 40 on from step 120.
    for k in range(180):
        lines.append(f'train_step{{hpc_job="101"}} {k} {base + 10 * k:.0f}')
    for k in range(60):
        lines.append(f'train_step{{hpc_job="101"}} {120 + k} {base + 2400 + 10 * k:.0f}')
    # 102: the same pace, checkpointed (unseen) at step 90, restarted from it.
    for k in range(180):
        lines.append(f'train_step{{hpc_job="102"}} {k} {base + 10 * k:.0f}')
    for k in range(60):
        lines.append(f'train_step{{hpc_job="102"}} {90 + k} {base + 2400 + 10 * k:.0f}')
    # A series of a job the scheduler never recorded.
    for k in range(10):
        lines.append(f'train_step{{hpc_job="999"}} {k} {base + 10 * k:.0f}')
    lines.append("# TYPE train_last_checkpoint_timestamp_seconds gauge")
    for k in range(120, 180):  # from minute 20 on, the gauge holds the save's time
        lines.append(f'train_last_checkpoint_timestamp_seconds{{hpc_job="101"}} {base + 1200:.0f} {base + 10 * k:.0f}')
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusServer, datetime]]:
    root = tmp_path_factory.mktemp("ckpt-prom")
    t0 = _t0()
    _openmetrics(t0, root / "train.om.txt")
    backfill(root / "train.om.txt", root / "data")
    prom = PrometheusServer(root / "data")
    prom.start()
    yield prom, t0
    prom.stop()
    shutil.rmtree(root, ignore_errors=True)


def _warehouse(path: Path, t0: datetime) -> Warehouse:
    wh = Warehouse(path)
    jobs = pl.DataFrame({"cluster": [CLUSTER] * 2, "job_id": ["101", "102"], "tier": ["low"] * 2,
                         "preemptible": [True] * 2, "gpus": [8] * 2, "submit_time": [t0] * 2})
    wh.load("jobs", jobs, "slurm")
    runs = pl.DataFrame({
        "cluster": [CLUSTER] * 4, "job_id": ["101", "101", "102", "102"], "run": [1, 2, 1, 2], "gpus": [8] * 4,
        "start_time": [t0, t0 + timedelta(minutes=40)] * 2,
        "end_time": [t0 + timedelta(minutes=30), t0 + timedelta(minutes=50)] * 2,
        "state": ["preempted", "completed"] * 2,
    })
    wh.load("job_runs", runs, "slurm")
    return wh


def test_step_and_checkpoint_metrics_give_the_ledger_its_basis(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prom, t0 = server
    wh = _warehouse(tmp_path / "w.duckdb", t0)
    settings = {"prometheus": {"url": prom.url, "safety_lag": "1m"},
                "checkpoints": {"streams": ["prometheus"], "step_metric": "train_step",
                                "checkpoint_time_metric": "train_last_checkpoint_timestamp_seconds",
                                "metric_step": "10s", "lookback_hours": 12}}
    collector = CheckpointCollector(Config(values=settings), CLUSTER, ["prometheus"])
    collector.use_runs(*wh.recorded_runs(t0 - timedelta(hours=1)))
    for batch in collector.batches(wh.watermarks(collector.name)):
        wh.load_batch(batch)
    saves = wh.query("SELECT job_id, run, time, origin FROM checkpoints WHERE kind = 'checkpoint'").rows()
    assert saves == [("101", 1, t0 + timedelta(minutes=20), "prometheus")]
    firsts = wh.query("SELECT job_id, run, min(step) AS s FROM checkpoints WHERE kind = 'progress' GROUP BY ALL "
                      "ORDER BY ALL").rows()
    assert firsts == [("101", 1, 0.0), ("101", 2, 120.0), ("102", 1, 0.0), ("102", 2, 90.0)]
    quarantined = wh.query("SELECT record, reason FROM quarantine").rows()
    assert any('hpc_job="999"' in record and "no recorded job" in reason for record, reason in quarantined)
    analyze(wh, AnalyticsSettings())
    ledger = {r["victim_job_id"]: r for r in wh.query("SELECT * FROM preemption_ledger").to_dicts()}
    assert (ledger["101"]["basis"], ledger["101"]["progress_source"]) == ("checkpoint", "prometheus")
    assert ledger["101"]["lost_s"] == pytest.approx(600.0)
    # 102 first reached step 90 at minute 15 (one report every 10 s): 15 minutes lost by the preemption.
    assert (ledger["102"]["basis"], ledger["102"]["progress_source"]) == ("rollback", "prometheus")
    assert ledger["102"]["lost_s"] == pytest.approx(900.0, abs=10.0)
    # Collecting again reads from the cursor (less its lag) and adds nothing.
    collector = CheckpointCollector(Config(values=settings), CLUSTER, ["prometheus"])
    collector.use_runs(*wh.recorded_runs(t0 - timedelta(hours=1)))
    assert sum(wh.load_batch(b).loaded for b in collector.batches(wh.watermarks(collector.name))) == 0
    wh.close()
