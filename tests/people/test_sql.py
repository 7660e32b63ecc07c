"""Read-only ad-hoc SQL: what it refuses, its limits, the named queries and the command."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from preemptlens.readonly import Limits, QueryError, named_queries, query
from preemptlens.warehouse import Warehouse
from tests.people.people_seed import T0, jobs_warehouse, load_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = jobs_warehouse(tmp_path_factory.mktemp("sql"))
    with Warehouse(path) as wh:
        load_rows(
            wh,
            "job_runs",
            cluster=["c1"] * 4,
            job_id=["1", "1", "3", "2"],
            run=[1, 2, 1, 1],
            pool=["a100"] * 4,
            gpus=[8, 8, 2, 4],
            start_time=[T0, T0 + timedelta(hours=2), T0, T0 + timedelta(hours=1)],
            end_time=[T0 + timedelta(hours=1), None, T0 + timedelta(days=1), T0 + timedelta(hours=3)],
            state=["preempted", "running", "preempted", "completed"],
            preemptor_job_id=["2", None, "2", None],
        )
        load_rows(
            wh,
            "gpu_samples",
            cluster=["c1"] * 4,
            host=["n1", "n1", "n2", "n2"],
            gpu_uuid=["G0", "G0", "G1", "G1"],
            time=[T0, T0 + timedelta(minutes=1)] * 2,
            busy=[0.5, 1.0, 0.0, 0.0],
        )
    return path


def secret_file(tmp_path: Path) -> Path:
    target = tmp_path / "private.csv"
    target.write_text("secret\nsquirrel\n")
    return target


REFUSED = [
    ("COPY jobs TO '{out}'", "only SELECT"),
    ("COPY (SELECT 1) TO '{out}'", "only SELECT"),
    ("EXPORT DATABASE '{dir}'", "only SELECT"),
    ("ATTACH '{wh}' AS other", "only SELECT"),
    ("INSTALL httpfs", "only SELECT"),
    ("LOAD httpfs", "only SELECT"),
    ("SET enable_external_access = true", "only SELECT"),
    ("PRAGMA threads = 64", "only SELECT"),
    ("RESET lock_configuration", "only SELECT"),
    ("CREATE TABLE x AS SELECT 1", "only SELECT"),
    ("CREATE TEMP TABLE x AS SELECT 1", "only SELECT"),
    ("INSERT INTO jobs SELECT * FROM jobs", "only SELECT"),
    ("DELETE FROM jobs", "only SELECT"),
    ("UPDATE jobs SET tier = 'critical'", "only SELECT"),
    ("DROP TABLE jobs", "only SELECT"),
    ("CHECKPOINT", "only SELECT"),
    ("SELECT 1; DROP TABLE jobs", "one statement at a time"),
    ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
    ("SELECT * FROM read_csv('{secret}')", "file system operations are disabled"),
    ("SELECT * FROM read_text('/etc/passwd')", "file system operations are disabled"),
    ("SELECT * FROM read_blob('{secret}')", "file system operations are disabled"),
    ("SELECT * FROM read_parquet('{secret}')", "file system operations are disabled"),
    ("SELECT * FROM glob('/etc/*')", "file system operations are disabled"),
    ("SELECT * FROM query('COPY jobs TO ''{out}''')", r"query\(\) is not allowed"),
    ("SELECT * FROM duckdb_secrets()", "file system operations are disabled"),
    ("", "empty"),
]


@pytest.mark.parametrize(("sql", "message"), REFUSED)
def test_refused(warehouse: Path, tmp_path: Path, sql: str, message: str) -> None:
    text = sql.format(out=tmp_path / "out.csv", dir=tmp_path / "export", wh=warehouse, secret=secret_file(tmp_path))
    with pytest.raises(QueryError, match=message):
        query(warehouse, text)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "export").exists()
    # Nothing changed: the data is all there.
    assert query(warehouse, "SELECT count(*) FROM jobs").frame.item() == 3


def test_runaway_query_is_stopped(warehouse: Path) -> None:
    with pytest.raises(QueryError, match=r"ran longer than 0.5 s and was stopped"):
        query(warehouse, "SELECT count(*) FROM range(1000000000000) a", Limits(timeout_s=0.5))


def test_rows_are_capped(warehouse: Path) -> None:
    result = query(warehouse, "SELECT range AS i FROM range(1000) ORDER BY i DESC", Limits(max_rows=10))
    assert result.truncated and result.frame["i"].to_list() == list(range(999, 989, -1))
    assert not query(warehouse, "SELECT * FROM jobs", Limits(max_rows=3)).truncated


def test_reads_that_are_allowed(warehouse: Path) -> None:
    with_cte = "WITH t AS (SELECT tier, count(*) AS n FROM jobs GROUP BY tier) SELECT * FROM t ORDER BY tier"
    result = query(warehouse, with_cte)
    assert result.frame.rows() == [("high", 1), ("low", 2)]
    assert query(warehouse, "EXPLAIN SELECT * FROM jobs").frame.height >= 1
    assert query(warehouse, "SELECT current_setting('TimeZone') AS tz").frame.item() in ("UTC", "Etc/UTC")


def test_named_queries_all_run(warehouse: Path) -> None:
    queries = named_queries()
    assert {"preemptions_per_day", "top_victims", "quarantine_summary", "gpu_busy_by_host"} <= set(queries)
    for name, (description, text) in queries.items():
        assert description, f"sql/queries/{name}.sql needs a header comment saying what it shows"
        query(warehouse, text)
    per_day = query(warehouse, queries["preemptions_per_day"][1]).frame
    assert per_day.select("preemptions", "gpus_preempted").rows() == [(1, 8), (1, 2)]
    top = query(warehouse, queries["top_victims"][1]).frame
    assert top["job_id"].to_list() == ["3", "1"] and top["preempted_run_gpu_hours"].to_list() == [48.0, 8.0]
    busy = query(warehouse, queries["gpu_busy_by_host"][1]).frame
    assert busy.select("host", "mean_busy").rows() == [("n2", 0.0), ("n1", 0.75)]


def cli(warehouse: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "preemptlens.cli", "--warehouse", str(warehouse), "sql", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PREEMPTLENS_CONFIG": ""},
        timeout=60,
    )


def test_command_formats_and_errors(warehouse: Path) -> None:
    sql = "SELECT job_id, tier, gpus FROM jobs ORDER BY job_id"
    table = cli(warehouse, sql)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split("|")[0].strip() == "job_id" and lines[2].split() == ["1", "|", "low", "|", "8"]
    assert lines[-1] == "(3 rows)"
    as_csv = cli(warehouse, "--format", "csv", sql)
    rows = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows == [["job_id", "tier", "gpus"], ["1", "low", "8"], ["2", "high", "4"], ["3", "low", "2"]]
    as_json = cli(warehouse, "-f", "json", "SELECT job_id, submit_time FROM jobs ORDER BY job_id LIMIT 1")
    assert json.loads(as_json.stdout) == [{"job_id": "1", "submit_time": "2026-11-02T08:00:00+00:00"}]
    named = cli(warehouse, "--query", "top_victims", "-f", "csv")
    assert named.returncode == 0 and named.stdout.splitlines()[1].startswith("c1,3,")
    refused = cli(warehouse, "DELETE FROM jobs")
    assert refused.returncode == 2 and "only SELECT" in refused.stderr and refused.stdout == ""


def test_prompt_runs_statements_until_eof(warehouse: Path) -> None:
    script = "SELECT count(*) AS n\n  FROM jobs;\nDROP TABLE jobs;\n.tables\nSELECT 41 + 1 AS answer;\n"
    result = cli(warehouse, stdin=script)
    assert result.returncode == 1, "a failed statement in a piped script sets the exit status"
    assert "only SELECT" in result.stderr
    out = result.stdout
    assert "n\n-\n3\n(1 row)" in out and "answer\n------\n    42" in out and "job_runs" in out
