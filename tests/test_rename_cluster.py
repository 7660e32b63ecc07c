"""`preemptlens rename-cluster`: rows loaded under the wrong name move, keys stay unique, the move is recorded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.cli import main
from preemptlens.commands.collect import checked_batches
from preemptlens.commands.rename_cluster import rename
from preemptlens.contract import Batch, Watermark
from preemptlens.errors import ConfigError
from preemptlens.warehouse import Warehouse

T0 = datetime(2026, 11, 2, 8, tzinfo=UTC)
COUNTED = ("jobs", "job_runs", "preemption_links", "gpu_samples", "_watermarks", "preemption_ledger")


def _load(wh: Warehouse, cluster: str, jobs: list[str], host: str) -> None:
    frames = {
        "jobs": pl.DataFrame([{"cluster": cluster, "job_id": j, "tier": "low", "gpus": 1, "pool": "a",
                               "submit_time": T0, "preemptible": True} for j in jobs]),
        "job_runs": pl.DataFrame([{"cluster": cluster, "job_id": j, "run": 1, "gpus": 1, "pool": "a",
                                   "start_time": T0, "end_time": T0 + timedelta(hours=1), "state": "preempted"}
                                  for j in jobs]),
        "preemption_links": pl.DataFrame([{"cluster": cluster, "victim_job_id": j, "time": T0 + timedelta(hours=1),
                                           "preemptor_job_id": "p"} for j in jobs]),
        "gpu_samples": pl.DataFrame([{"cluster": cluster, "host": host, "gpu_uuid": "GPU-0", "gpu_index": 0,
                                      "time": T0 + timedelta(minutes=m), "busy": 0.5} for m in range(3)]),
    }
    cursor = Watermark("slurm", cluster, "sacct", f"cursor-{cluster}")
    wh.load_batch(Batch(source="test", frames=frames, watermarks=[cursor]))


def _counts(wh: Warehouse) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for table in COUNTED:
        for cluster, n in wh.query(f"SELECT cluster, count(*) AS n FROM {table} GROUP BY cluster").rows():
            counts[(table, cluster)] = n
    return counts


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    warehouse = Warehouse(tmp_path / "w.duckdb")
    _load(warehouse, "demo", ["1", "2"], "node1")  # Slurm rows landed as `demo`
    _load(warehouse, "gpu-east", ["9"], "node2")  # what was loaded under the right name
    analyze(warehouse, AnalyticsSettings())
    return warehouse


def test_every_table_moves_and_the_move_is_recorded(wh: Warehouse, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    before = _counts(wh)
    wh.close()
    assert main(["--warehouse", str(tmp_path / "w.duckdb"), "rename-cluster", "demo", "gpu-east"]) == 0
    out = capsys.readouterr().out
    assert "jobs: 2 rows moved from demo to gpu-east" in out and "preemptlens analyze" in out
    with Warehouse(tmp_path / "w.duckdb") as again:
        after = _counts(again)
        for table in COUNTED:
            assert (table, "demo") not in after
            if table == "_watermarks":
                continue
            assert after[(table, "gpu-east")] == before[(table, "demo")] + before[(table, "gpu-east")], table
        # a whole cluster's verdict is not summed: the old name's goes, the next analyze computes the new one's
        assert again.query("SELECT cluster FROM readiness_verdict").rows() == [("gpu-east",)]
        # one cursor per stream: the one the collection under the right name wrote
        assert again.watermarks("slurm") == {("gpu-east", "sacct"): "cursor-gpu-east"}
        logged = again.query("SELECT source, loaded FROM _loads WHERE source LIKE 'rename-cluster%'").rows()
        printed = sum(int(line.split(": ")[1].split()[0]) for line in out.splitlines() if "rows moved" in line)
        assert logged == [("rename-cluster demo -> gpu-east", printed)]
        assert printed > sum(v for (t, c), v in before.items() if c == "demo" and t != "_watermarks")


def test_a_rename_onto_the_same_records_is_refused_and_moves_nothing(wh: Warehouse, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _load(wh, "gpu-west", ["2", "3"], "node9")  # job 2 is under demo too
    before = _counts(wh)
    wh.close()
    assert main(["--warehouse", str(tmp_path / "w.duckdb"), "rename-cluster", "demo", "gpu-west"]) != 0
    err = capsys.readouterr().err
    assert "'gpu-west' already holds rows with the keys of 'demo'" in err and "jobs (1 rows)" in err
    assert "Traceback" not in err
    with Warehouse(tmp_path / "w.duckdb") as again:
        assert _counts(again) == before
        assert again.query("SELECT count(*) AS n FROM _loads WHERE source LIKE 'rename%'")["n"][0] == 0


def test_a_cursor_only_old_has_moves_with_its_rows(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        _load(wh, "demo", ["1"], "node1")
        wh.con.execute("INSERT INTO _watermarks VALUES ('kubernetes', 'demo', 'pods', '42', now())")
        rename(wh, "demo", "k8s-a")
        assert wh.watermarks("kubernetes") == {("k8s-a", "pods"): "42"}
        assert wh.watermarks("slurm") == {("k8s-a", "sacct"): "cursor-demo"}


def test_an_unknown_name_says_so(wh: Warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh.close()
    assert main(["--warehouse", str(tmp_path / "w.duckdb"), "rename-cluster", "nope", "gpu-east"]) != 0
    assert "no rows carry the cluster name 'nope'" in capsys.readouterr().err


class _Source:
    """A collector whose source names the cluster `plens` (as Slurm's ClusterName would)."""

    name = "slurm"

    def batches(self, marks: object) -> Iterator[Batch]:
        del marks
        yield Batch(source="slurm", frames={}, watermarks=[])  # nothing yet: the check waits
        yield Batch(source="slurm", frames={"jobs": pl.DataFrame({"cluster": ["plens"]})},
                    watermarks=[Watermark("slurm", "plens", "sacct", "c")])


def test_an_upgraded_collector_does_not_split_the_cluster_silently() -> None:
    with pytest.raises(ConfigError) as err:
        list(checked_batches(_Source(), {("demo", "sacct"): "x"}))
    assert "rename-cluster demo plens" in err.value.hint and "nothing was loaded" in err.value.message
    assert len(list(checked_batches(_Source(), {}))) == 2  # a new warehouse
    assert len(list(checked_batches(_Source(), {("plens", "sacct"): "x"}))) == 2  # already renamed
