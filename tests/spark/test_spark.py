"""Spark over the Parquet lake against DuckDB, row for row, on a simulated cluster."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from analytics_scenario import simulated_and_analysed, small_hoarding_cluster
from polars.testing import assert_frame_equal

from preemptlens.analytics.lake import export_changed, lake_connection, read_manifest
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.spark import SCANS, Scan, register_functions, run_duckdb, run_spark, spark_session
from preemptlens.cli import main
from preemptlens.config import load_config
from preemptlens.errors import ConfigError
from preemptlens.warehouse import SQL_DIR, Warehouse

SIM = small_hoarding_cluster("spark", days=1.0)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Warehouse, Path]]:
    root = tmp_path_factory.mktemp("spark")
    with simulated_and_analysed(root / "w.duckdb", SIM, full=True) as wh:
        export_changed(wh, root / "lake")
        yield wh, root / "lake"


@pytest.fixture(scope="module")
def spark_run(
    warehouse: tuple[Warehouse, Path], spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """A copy of the lake after one `preemptlens spark` run, and what it printed (the scans are slow: run once)."""
    _, lake = warehouse
    copy = tmp_path_factory.mktemp("sparklake") / "lake"
    shutil.copytree(lake, copy)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["spark", "--lake", str(copy)]) == 0
    return copy, out.getvalue()


@pytest.fixture(scope="module")
def spark_lake(spark_run: tuple[Path, str]) -> Path:
    return spark_run[0]


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    frame = pl.from_arrow(con.sql(sql).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame.sort(frame.columns, nulls_last=True) if frame.width else frame


def same(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    # Timestamps, strings, counts and single differences of epochs are exact; sums of doubles
    # (allocated and idle GPU-hours, work done) may add up in another order on Spark's partitions.
    assert_frame_equal(got, expected, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def test_the_scenario_gives_every_scan_rows(warehouse: tuple[Warehouse, Path]) -> None:
    wh, _ = warehouse
    for scan in SCANS:
        assert wh.query(f"SELECT count(*) AS n FROM {scan.name}")["n"][0] > 0, f"{scan.name} is empty: nothing compared"


def test_shared_idle_stretch_sql_equals_the_warehouse_refresh(warehouse: tuple[Warehouse, Path]) -> None:
    """sql/scans/gpu_idle_stretches.sql on DuckDB over the lake = analytics/hoarding.py in the warehouse."""
    wh, lake = warehouse
    con, _ = run_duckdb(lake, SCANS[:1])
    expected = rows(wh.con, "SELECT * FROM gpu_idle_stretches")
    assert expected.height > 5
    assert_frame_equal(rows(con, "SELECT * FROM temp.gpu_idle_stretches"), expected)


def test_duckdb_over_the_lake_equals_the_warehouse(warehouse: tuple[Warehouse, Path]) -> None:
    wh, lake = warehouse
    con, seconds = run_duckdb(lake)
    assert set(seconds) == {"hoarding", "ledger"}
    for scan in SCANS:
        same(rows(con, f"SELECT * FROM temp.{scan.name}"), rows(wh.con, f"SELECT * FROM {scan.name}"))


def test_spark_results_in_the_lake_equal_the_warehouse_row_for_row(
    warehouse: tuple[Warehouse, Path], spark_lake: Path
) -> None:
    wh, _ = warehouse
    lake = lake_connection(spark_lake)
    for scan in SCANS:
        got = rows(lake, f"SELECT * FROM {scan.name}")
        expected = rows(wh.con, f"SELECT * FROM {scan.name}")
        assert got.height == expected.height > 0, scan.name
        same(got, expected)
    for table in ("analytics_params", "analytics_sample_steps"):
        assert_frame_equal(rows(lake, f"SELECT * FROM {table} ORDER BY ALL"),
                           rows(wh.con, f"SELECT * FROM {table} ORDER BY ALL"))


def test_spark_writes_the_lake_layout(warehouse: tuple[Warehouse, Path], spark_lake: Path) -> None:
    _, original = warehouse
    manifest = read_manifest(spark_lake)
    before = read_manifest(original)
    for scan in SCANS:
        entry = manifest[scan.name]
        files = sorted(p.relative_to(spark_lake / scan.name).as_posix() for p in (spark_lake / scan.name).rglob("*"))
        parquet = [f for f in files if f.endswith(".parquet")]
        # The same partitions the warehouse export wrote, one data.parquet each, nothing else.
        assert sorted(entry["partitions"]) == parquet == sorted(before[scan.name]["partitions"])  # type: ignore[arg-type]
        assert all(f.endswith("/data.parquet") or f == "data.parquet" for f in parquet)
        assert entry["columns"] == before[scan.name]["columns"]
    assert not [p for p in spark_lake.iterdir() if p.name.startswith(".spark-")], "staging left behind"
    # Raw tables are untouched.
    assert manifest["gpu_samples"] == before["gpu_samples"]


def test_a_failed_run_leaves_the_lake_as_it_was(spark_lake: Path, spark: Any, tmp_path: Path) -> None:
    broken = tmp_path / "gpu_idle_stretches.sql"
    broken.write_text("-- Broken on purpose.\nselect no_such_column from gpu_samples\n")
    # analytics_params is staged before the broken scan fails: the staging must go too.
    scans = (Scan("gpu_idle_stretches", "hoarding", broken), *SCANS[1:])
    listing = sorted((p.as_posix(), p.stat().st_mtime_ns) for p in spark_lake.rglob("*"))
    manifest = (spark_lake / "_lake.json").read_text()
    with pytest.raises(Exception, match="no_such_column"):
        run_spark(spark, spark_lake, load_config(overrides={}).of(AnalyticsSettings), scans=scans)
    assert sorted((p.as_posix(), p.stat().st_mtime_ns) for p in spark_lake.rglob("*")) == listing
    assert (spark_lake / "_lake.json").read_text() == manifest


def test_the_command_prints_rows_and_rerunning_changes_nothing(
    warehouse: tuple[Warehouse, Path], spark_run: tuple[Path, str], spark: Any
) -> None:
    wh, _ = warehouse
    spark_lake, out = spark_run
    for name in ("gpu_idle_stretches", "preemption_ledger"):
        assert f"{name} {wh.query(f'SELECT count(*) AS n FROM {name}')['n'][0]}" in out
    assert spark.getActiveSession() is not None, "the command must not stop a session it did not start"
    # The first two scans again (all of them would double the test's time): same rows, same partitions.
    before = read_manifest(spark_lake)
    run_spark(spark, spark_lake, load_config(overrides={}).of(AnalyticsSettings), scans=SCANS[:2])
    after = read_manifest(spark_lake)
    lake = lake_connection(spark_lake)
    for scan in SCANS[:2]:
        assert sorted(after[scan.name]["partitions"]) == sorted(before[scan.name]["partitions"])  # type: ignore[arg-type]
        same(rows(lake, f"SELECT * FROM {scan.name}"), rows(wh.con, f"SELECT * FROM {scan.name}"))


def _defined(path: Path) -> set[str]:
    return set(re.findall(r"CREATE OR REPLACE TEMP(?:ORARY)? (?:MACRO|FUNCTION) (\w+)", path.read_text()))


def test_both_engines_run_the_same_sql_files() -> None:
    """No Spark fork of a view; Spark defines every dialect function DuckDB does (explode is Spark's own)."""
    assert not (SQL_DIR / "spark").exists()
    assert all(scan.path.parent.name in ("scans", "views") for scan in SCANS)
    functions = SQL_DIR / "functions"
    assert _defined(functions / "duckdb.sql") - {"explode"} <= _defined(functions / "spark.sql")
    assert {"is_idle", "progress_basis", "progress_at_risk_s", "is_measured"} <= _defined(functions / "shared.sql")


def same_on_both_engines(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    """The rows `sql` gives on DuckDB, sorted, once Spark has given the same rows: each dialect function
    must be one rule on both engines, and every test of one checks that the same way."""
    with Warehouse(":memory:") as wh:
        duck = sorted(wh.con.execute(sql).fetchall())
    register_functions(spark)
    assert sorted(tuple(r) for r in spark.sql(sql).collect()) == duck
    return duck


HOURS = [
    ("2026-10-05 10:30:00", "2026-10-05 12:10:00"),  # three hours, the first and last partial
    ("2026-10-05 10:30:00", "2026-10-05 10:40:00"),  # within one hour
    ("2026-10-05 12:30:00", "2026-10-05 10:40:00"),  # end before start: no hour (Spark's sequence would raise)
    ("2026-10-05 10:30:00", None),  # unknown end: no hour
]


def test_hour_series_gives_the_same_hours_on_both_engines(spark: Any) -> None:
    def literal(value: str | None) -> str:
        return f"TIMESTAMP '{value}'" if value else "CAST(NULL AS TIMESTAMP)"

    values = ", ".join(f"({i}, {literal(a)}, {literal(b)})" for i, (a, b) in enumerate(HOURS))
    sql = (
        "SELECT i, explode(hours) AS hour FROM "
        f"(SELECT i, hour_series(a, b) AS hours FROM (VALUES {values}) AS t(i, a, b)) AS spans"
    )
    duck = same_on_both_engines(spark, sql)
    assert [i for i, _ in duck] == [0, 0, 0, 1]
    assert [h.hour for _, h in duck] == [10, 11, 12, 10]


def test_is_idle_is_one_rule_on_both_engines(spark: Any) -> None:
    sql = (
        "SELECT busy, zero_rule, is_idle(busy, zero_rule, 0.05) AS idle FROM (VALUES (0.0, true), (0.0, false), "
        "(0.01, true), (0.01, false), (0.05, false), (0.5, false)) AS t(busy, zero_rule)"
    )
    duck = same_on_both_engines(spark, sql)
    # sorted by (busy, zero_rule): 0 is idle under both rules, 0.01 only under the threshold
    assert [idle for _, _, idle in duck] == [True, True, True, False, False, False]


def test_progress_at_risk_is_one_rule_on_both_engines(spark: Any) -> None:
    """The ledger's lost progress and the live cost's time at risk: one function, the same on both engines."""
    sql = (
        "SELECT i, progress_basis(saved, rolled, interval_s) AS basis, "
        "progress_at_risk_s(progress_basis(saved, rolled, interval_s), since_s, age_s, interval_s) AS at_risk "
        "FROM (VALUES (0, true, true, 600.0, 100.0, 3000.0), (1, false, false, 600.0, 100.0, 3000.0), "
        "(2, false, false, 600.0, 100.0, 400.0), (3, false, false, CAST(NULL AS DOUBLE), 100.0, 3000.0), "
        "(4, false, true, 600.0, 250.0, 3000.0)) "
        "AS t(i, saved, rolled, interval_s, since_s, age_s)"
    )
    duck = same_on_both_engines(spark, sql)
    # measured: since the checkpoint; rollback: since the restart step was first reached; declared: half the
    # interval once the run is older, else its age; assumed: age
    assert duck == [(0, "checkpoint", 100.0), (1, "declared", 300.0), (2, "declared", 400.0), (3, "assumed", 3000.0),
                    (4, "rollback", 250.0)]


def test_is_measured_is_one_rule_on_both_engines(spark: Any) -> None:
    """Which losses loss coverage, Q3 and goodput count as measured: one function, the same on both engines."""
    sql = (
        "SELECT i, is_measured(basis) AS measured FROM (VALUES (0, 'checkpoint'), (1, 'rollback'), (2, 'declared'), "
        "(3, 'assumed'), (4, CAST(NULL AS STRING))) AS t(i, basis)"
    )
    # an unknown basis is no measurement: false, never NULL, so that counts of measured losses add up
    assert same_on_both_engines(spark, sql) == [(0, True), (1, True), (2, False), (3, False), (4, False)]


def test_missing_pyspark_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(ConfigError) as raised, spark_session():
        pass
    assert "preemptlens[spark]" in str(raised.value)


def test_the_command_needs_a_lake(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREEMPTLENS_LAKE__FOLDER", raising=False)
    monkeypatch.chdir(Path(__file__).parent)
    assert main(["spark"]) == 2
    assert "--lake" in capsys.readouterr().err
