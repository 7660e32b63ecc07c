"""Ad-hoc SQL against hostile queries: every statement class and every wrapper in DuckDB's grammar
that could smuggle one in is refused in one line; what runs, runs in a child process with a
deadline, an address-space limit and caps on rows and bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from preemptlens.readonly import Limits, QueryError, check_statement, query
from preemptlens.warehouse import snapshot_path
from tests.people.people_seed import jobs_warehouse

ROOT = Path(__file__).resolve().parents[2]
READ_ONLY = "only SELECT"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jobs_warehouse(tmp_path_factory.mktemp("hostile"))


# One statement per class DuckDB's grammar knows, and each wrapper around a write or a setting
# change: EXPLAIN [ANALYZE] with and without options, PREPARE/EXECUTE, CTEs, PIVOT, CALL, ...
REFUSED = [
    "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{snapshot}.tmp/x.csv'",
    "EXPLAIN ANALYZE SET VARIABLE x = 1",
    "EXPLAIN ANALYZE CREATE MACRO m(a) AS a",
    "EXPLAIN ANALYZE CREATE VIEW v AS SELECT 1",
    "EXPLAIN ANALYZE INSERT INTO jobs SELECT * FROM jobs",
    "EXPLAIN (ANALYZE, FORMAT json) CREATE TEMP TABLE t AS SELECT 1",
    "EXPLAIN (FORMAT json) DELETE FROM jobs",
    "/* comment */ EXPLAIN -- and another\n ANALYZE CREATE TEMP TABLE t AS SELECT 1",
    "EXPLAIN EXPLAIN SELECT 1",
    "EXPLAIN ANALYZE PRAGMA version",
    "EXPLAIN ANALYZE CALL pragma_version()",
    "UPDATE EXTENSIONS",
    "UPDATE EXTENSIONS (httpfs)",
    "PRAGMA threads = 64",
    "PRAGMA version",
    "CALL pragma_version()",
    "SET threads = 1",
    "SET VARIABLE x = 42",
    "RESET threads",
    "ATTACH ':memory:' AS m",
    "DETACH snapshot",
    "USE memory",
    "COPY jobs TO '{snapshot}.tmp/x.csv'",
    "COPY FROM DATABASE snapshot TO memory",
    "EXPORT DATABASE '{snapshot}.tmp'",
    "IMPORT DATABASE '{snapshot}.tmp'",
    "CREATE TEMP TABLE t AS SELECT 1",
    "CREATE MACRO m(a) AS a",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE SEQUENCE s",
    "CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')",
    "CREATE TYPE mood AS ENUM ('a')",
    "ALTER TABLE jobs ADD COLUMN x INT",
    "DROP TABLE jobs",
    "INSERT INTO jobs SELECT * FROM jobs",
    "UPDATE jobs SET tier = 'critical'",
    "DELETE FROM jobs",
    "TRUNCATE jobs",
    "MERGE INTO jobs USING jobs AS s ON false WHEN NOT MATCHED THEN DO NOTHING",
    "WITH x AS (SELECT 1) INSERT INTO jobs SELECT * FROM jobs",
    "WITH x AS (SELECT 1) DELETE FROM jobs",
    "PREPARE p AS SELECT 1",
    "EXECUTE p",
    "DEALLOCATE p",
    "PIVOT jobs ON tier USING count(*)",
    "INSTALL httpfs",
    "LOAD httpfs",
    "FORCE INSTALL httpfs",
    "CHECKPOINT",
    "FORCE CHECKPOINT",
    "VACUUM",
    "ANALYZE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "DETACH DATABASE snapshot",
    "SELECT 1; SELECT 2",
    "",
    "   -- only a comment",
    "SELECT * FROM query('DELETE FROM jobs')",
    "SELECT * FROM query_table('jobs')",
    "SELECT * FROM (SELECT * FROM query('SELECT 1'))",
    "WITH q AS (SELECT * FROM query('SELECT 1')) SELECT * FROM q",
    "SELECT (SELECT count(*) FROM query('SELECT 1'))",
    "SELECT * FROM checkpoint()",
    "SELECT * FROM force_checkpoint()",
    "SELEC 1",
]


@pytest.mark.parametrize("sql", REFUSED)
def test_refused_in_one_line_before_anything_runs(warehouse: Path, sql: str) -> None:
    text = sql.format(snapshot=snapshot_path(warehouse))
    with pytest.raises(QueryError) as caught:
        check_statement(text)
    message = caught.value.message
    assert "\n" not in message and "Traceback" not in message and message


@pytest.mark.parametrize(
    "sql",
    ["EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1", "UPDATE EXTENSIONS", "PIVOT jobs ON tier USING count(*)",
     "WITH x AS (SELECT 1) DELETE FROM jobs", "PREPARE p AS SELECT 1", "CALL pragma_version()"],
)
def test_the_refusal_names_the_statement(sql: str) -> None:
    with pytest.raises(QueryError, match=READ_ONLY):
        check_statement(sql)


ALLOWED = [
    ("SELECT count(*) AS n FROM jobs", 1),
    ("FROM jobs", 3),
    ("VALUES (1), (2)", 2),
    ("WITH t AS (SELECT * FROM jobs) SELECT * FROM t", 3),
    ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5) SELECT * FROM r", 5),
    ("SELECT 1 UNION ALL SELECT 2", 2),
    ("SUMMARIZE jobs", None),
    ("DESCRIBE jobs", None),
    ("SHOW TABLES", None),
    ("EXPLAIN SELECT * FROM jobs", None),
    ("EXPLAIN ANALYZE SELECT * FROM jobs", None),
    ("EXPLAIN (FORMAT json) SELECT * FROM jobs", None),
    ("SELECT * FROM range(4)", 4),
    ("UNPIVOT jobs ON tier INTO NAME k VALUE v", 3),
]


@pytest.mark.parametrize(("sql", "rows"), ALLOWED)
def test_reads_still_run(warehouse: Path, sql: str, rows: int | None) -> None:
    result = query(warehouse, sql)
    assert result.frame.height == rows if rows is not None else result.frame.height >= 1


def test_nothing_was_written_beside_the_snapshot(warehouse: Path) -> None:
    for sql in REFUSED:
        try:
            query(warehouse, sql.format(snapshot=snapshot_path(warehouse)))
        except QueryError:
            pass
    assert not Path(f"{snapshot_path(warehouse)}.tmp").exists()
    assert query(warehouse, "SELECT count(*) FROM jobs").frame.item() == 3


def test_a_scalar_that_ignores_interrupts_is_killed_at_the_deadline(warehouse: Path) -> None:
    # length(repeat(...)) allocates one huge string and never checks for an interrupt: in-process
    # it ran 79 s past a 10 s limit and reached 5 GB. The child either hits its address-space
    # limit or is killed at the deadline; either way the caller gets one line and the next query runs.
    with pytest.raises(QueryError) as caught:
        query(warehouse, "SELECT length(repeat('x', 2500000000)) AS n", Limits(timeout_s=5, address_space_limit="3GB"))
    assert "\n" not in caught.value.message
    assert any(word in caught.value.message for word in ("memory", "was stopped", "ended without an answer"))
    assert query(warehouse, "SELECT 41 + 1 AS n").frame.item() == 42


def test_a_runaway_query_is_stopped_by_the_deadline(warehouse: Path) -> None:
    with pytest.raises(QueryError, match=r"ran longer than 0.5 s and was stopped"):
        query(warehouse, "SELECT count(*) FROM range(1000000000000) a, range(1000) b", Limits(timeout_s=0.5))


def test_the_result_is_capped_in_bytes(warehouse: Path) -> None:
    with pytest.raises(QueryError, match=r"more than sql\.max_result_bytes"):
        query(warehouse, "SELECT repeat('x', 1000) AS s FROM range(1000)", Limits(max_result_bytes="100KB"))
    assert query(warehouse, "SELECT repeat('x', 10) AS s FROM range(10)", Limits(max_result_bytes="100KB")).frame.height


@pytest.mark.parametrize(
    "limits",
    [{"max_rows": -1}, {"max_rows": 0}, {"timeout_s": -1.0}, {"timeout_s": float("inf")}, {"timeout_s": float("nan")},
     {"max_result_bytes": "lots"}, {"address_space_limit": "-4GB"}],
)
def test_nonsense_limits_are_refused(limits: dict[str, object]) -> None:
    with pytest.raises(QueryError, match="sql\\."):
        Limits(**limits)  # type: ignore[arg-type]


def test_the_command_refuses_a_negative_row_cap(warehouse: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "preemptlens.cli", "--warehouse", str(warehouse), "sql", "--max-rows", "-1",
         "SELECT 1"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PREEMPTLENS_CONFIG": ""}, timeout=60,
    )
    assert result.returncode == 2 and "--max-rows" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_the_command_keeps_every_configured_limit_its_flags_do_not_replace(warehouse: Path) -> None:
    # A flag replaces its own limit only: the configured result-size cap still holds beside --max-rows.
    result = subprocess.run(
        [sys.executable, "-m", "preemptlens.cli", "--warehouse", str(warehouse), "sql", "--max-rows", "5000",
         "SELECT repeat('x', 1000) AS s FROM range(1000)"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={**os.environ, "PREEMPTLENS_CONFIG": "", "PREEMPTLENS_SQL__MAX_RESULT_BYTES": "100KB"},
    )
    assert result.returncode != 0 and "sql.max_result_bytes" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
