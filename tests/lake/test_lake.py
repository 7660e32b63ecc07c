"""The Parquet lake against the warehouse it was exported from, on a simulated cluster."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from analytics_scenario import simulated_and_analysed, small_hoarding_cluster
from polars.testing import assert_frame_equal

from preemptlens.analytics.lake import MANIFEST, export_changed, lake_connection, read_manifest
from preemptlens.analytics.simulator import simulate_into
from preemptlens.analytics.views import _body, registry
from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

SIM = small_hoarding_cluster("lake", days=2.0)


@pytest.fixture(scope="module")
def sim_wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    with simulated_and_analysed(tmp_path_factory.mktemp("lake") / "w.duckdb", SIM) as wh:
        yield wh


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    frame = pl.from_arrow(con.sql(sql).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame.sort(frame.columns, nulls_last=True) if frame.width else frame


def test_every_view_gives_the_same_rows_on_the_lake(sim_wh: Warehouse, tmp_path: Path) -> None:
    report = export_changed(sim_wh, tmp_path)
    assert report.written > 10 and report.unchanged == report.removed == 0
    lake = lake_connection(tmp_path)
    views = registry()
    nonempty = 0
    for view in views:
        expected = rows(sim_wh.con, _body(view.sql))
        got = rows(lake, _body(view.sql))
        # Sums may add up in another order over files than over the table: equal to the last bits only.
        assert_frame_equal(got, expected, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
        # The exported figure itself matches too, column for column and type for type.
        assert_frame_equal(rows(lake, f"SELECT * FROM {view.name}"), rows(sim_wh.con, f"SELECT * FROM {view.name}"))
        nonempty += expected.height > 0
    assert nonempty >= len(views) - 2, "the scenario must give most figures rows to compare"
    for table in ("pools", "jobs", "job_runs", "checkpoints", "gpu_samples", "preemption_links"):
        assert_frame_equal(rows(lake, f"SELECT * FROM {table}"), rows(sim_wh.con, f"SELECT * FROM {table}"))


def test_layout_is_hive_partitioned_by_cluster_and_utc_day(sim_wh: Warehouse, tmp_path: Path) -> None:
    export_changed(sim_wh, tmp_path)
    days = sorted(p.name for p in (tmp_path / "gpu_samples" / "cluster=lake").iterdir())
    # Starting at 20:00 UTC for 48 h touches three UTC days.
    assert days == ["date=2026-10-05", "date=2026-10-06", "date=2026-10-07"]
    per_day = sim_wh.query(
        "SELECT CAST(timezone('UTC', time) AS DATE) AS d, count(*) AS n FROM gpu_samples GROUP BY d ORDER BY d"
    )
    con = duckdb.connect()
    for day, n in per_day.iter_rows():
        path = tmp_path / "gpu_samples" / "cluster=lake" / f"date={day}" / "data.parquet"
        assert con.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone() == (n,)
    assert (tmp_path / "analytics_params" / "data.parquet").exists()
    assert (tmp_path / "readiness_scorecard" / "cluster=lake" / "data.parquet").exists()


def test_only_changed_partitions_are_rewritten_and_never_duplicated(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        simulate_into(wh, dataclasses.replace(SIM, days=1.0))
        lake = tmp_path / "lake"
        first = export_changed(wh, lake)
        again = export_changed(wh, lake)
        assert again.written == again.removed == 0 and again.unchanged == first.written

        job = wh.query("SELECT * EXCLUDE (source, _load_id) FROM jobs ORDER BY submit_time LIMIT 1")
        wh.load("jobs", job.with_columns(pl.lit("renamed").alias("name")), "test")
        changed = export_changed(wh, lake)
        assert (changed.written, changed.removed) == (1, 0)
        assert (
            changed.tables["jobs"].written == 1
            and changed.tables["jobs"].rows
            == wh.query(
                "SELECT count(*) AS n FROM jobs WHERE CAST(timezone('UTC', submit_time) AS DATE) = $d",
                {"d": job["submit_time"][0].date()},
            )["n"][0]
        )
        con = lake_connection(lake)
        assert_frame_equal(rows(con, "SELECT * FROM jobs"), rows(wh.con, "SELECT * FROM jobs"))
        assert rows(con, f"SELECT name FROM jobs WHERE job_id = '{job['job_id'][0]}'")["name"].to_list() == ["renamed"]

        # A day whose rows all go away loses its partition file.
        last = wh.query("SELECT max(CAST(timezone('UTC', time) AS DATE)) AS d FROM gpu_samples")["d"][0]
        wh.con.execute("DELETE FROM gpu_samples WHERE CAST(timezone('UTC', time) AS DATE) = $d", {"d": last})
        gone = export_changed(wh, lake)
        assert (gone.written, gone.removed) == (0, 1)
        assert not (lake / "gpu_samples" / "cluster=lake" / f"date={last}").exists()
        assert f"cluster=lake/date={last}/data.parquet" not in read_manifest(lake)["gpu_samples"]["partitions"]  # type: ignore[operator]
        assert_frame_equal(
            rows(lake_connection(lake), "SELECT * FROM gpu_samples"), rows(wh.con, "SELECT * FROM gpu_samples")
        )


def test_a_reader_never_sees_half_a_partition(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        simulate_into(wh, dataclasses.replace(SIM, days=1.0))
        lake = tmp_path / "lake"
        export_changed(wh, lake)
        day = wh.query("SELECT min(CAST(timezone('UTC', time) AS DATE)) AS d FROM gpu_samples")["d"][0]
        path = lake / "gpu_samples" / "cluster=lake" / f"date={day}" / "data.parquet"
        full = wh.query("SELECT * FROM gpu_samples WHERE CAST(timezone('UTC', time) AS DATE) = $d", {"d": day})
        half = full.height // 2
        seen: set[int] = set()
        failures: list[BaseException] = []
        stop = threading.Event()

        def reader() -> None:
            con = duckdb.connect()
            while not stop.is_set() and len(seen) < 10_000:
                try:
                    seen.add(int(con.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0]))  # type: ignore[index]
                except duckdb.Error as exc:  # a torn or missing file
                    failures.append(exc)
                    return

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            hosts = full["host"].unique().sort().to_list()
            for _ in range(6):
                # Alternate the partition between all its rows and the rows of half its hosts.
                wh.con.execute(
                    "DELETE FROM gpu_samples WHERE host IN (SELECT unnest($h))", {"h": hosts[: len(hosts) // 2]}
                )
                assert export_changed(wh, lake).tables["gpu_samples"].written >= 1
                wh.load("gpu_samples", full.drop("source", "_load_id"), "test")
                assert export_changed(wh, lake).tables["gpu_samples"].written >= 1
        finally:
            stop.set()
            thread.join(timeout=30)
        assert not failures
        smaller = full.height - full.filter(pl.col("host").is_in(hosts[: len(hosts) // 2])).height
        assert seen <= {full.height, smaller} and full.height in seen
        assert half > 0 and not list(path.parent.glob("*.tmp"))
        assert (lake / MANIFEST).exists()


def test_cli_exports_odd_cluster_names_and_runs_without_a_day(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "w.duckdb"
    with Warehouse(warehouse) as wh:
        for cluster in ("east/2", "1"):
            wh.load(
                "jobs",
                pl.DataFrame(
                    {
                        "cluster": [cluster],
                        "job_id": ["7"],
                        "tier": ["low"],
                        "preemptible": [True],
                        "gpus": [2],
                        "submit_time": [datetime(2026, 10, 5, 23, 30, tzinfo=UTC)],
                    }
                ),
                "test",
            )
            # A pending run that the source gave no submit time: its day is unknown.
            wh.load(
                "job_runs",
                pl.DataFrame({"cluster": [cluster], "job_id": ["7"], "run": [1], "gpus": [2], "state": ["pending"]}),
                "test",
            )
    lake = tmp_path / "lake"
    assert main(["--warehouse", str(warehouse), "export", "parquet", str(lake)]) == 0
    assert "written (4 rows" in capsys.readouterr().out
    assert (lake / "job_runs" / "cluster=east%2F2" / "date=__HIVE_DEFAULT_PARTITION__" / "data.parquet").exists()
    con = lake_connection(lake)
    assert rows(con, "SELECT cluster, job_id, submit_time FROM job_runs").rows() == [
        ("1", "7", None),
        ("east/2", "7", None),
    ]
    # Cluster "1" stays a string, not a number guessed from the path.
    assert rows(con, "SELECT cluster FROM jobs WHERE cluster = '1'").height == 1
    with Warehouse(warehouse) as wh:
        assert_frame_equal(rows(con, "SELECT * FROM jobs"), rows(wh.con, "SELECT * FROM jobs"))
    assert main(["--warehouse", str(warehouse), "export", "parquet", str(lake)]) == 0
    assert "0 partitions written" in capsys.readouterr().out
    assert main(["--warehouse", str(warehouse), "export", "parquet"]) != 0
    assert "lake.folder" in capsys.readouterr().err


def test_keep_current_follows_every_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = Path(__file__).resolve().parents[1] / "cases" / "import"
    lake = tmp_path / "lake"
    warehouse = str(tmp_path / "w.duckdb")
    monkeypatch.setenv("PREEMPTLENS_LAKE__KEEP_CURRENT", "true")
    monkeypatch.setenv("PREEMPTLENS_LAKE__FOLDER", str(lake))
    assert main(["--warehouse", warehouse, "import", str(cases / "jobs.jsonl")]) == 0
    assert "partition(s) rewritten" in capsys.readouterr().out
    jobs = lake_connection(lake).execute("SELECT job_id FROM jobs ORDER BY job_id").fetchall()
    assert jobs == [("100",), ("101",), ("102",)]
    # Nothing new: the lake is left as it is.
    assert main(["--warehouse", warehouse, "import", str(cases / "jobs.jsonl")]) == 0
    assert "0 partition(s) rewritten" in capsys.readouterr().out
    monkeypatch.setenv("PREEMPTLENS_LAKE__FOLDER", "")
    assert main(["--warehouse", warehouse, "import", str(cases / "jobs.jsonl")]) == 2
    assert "lake.folder is empty" in capsys.readouterr().err
