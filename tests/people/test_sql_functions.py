"""The ad-hoc SQL guard against every function DuckDB lists (duckdb_functions(), not a hand-kept list): each
function that runs the SQL it is given (found by calling every one of them with a canary statement, as text,
serialized and behind a view) is refused, in a table and in an expression, before anything runs; every other
function passes the guard; and `preemptlens sql` refuses the family too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from preemptlens.readonly import QueryError, check_statement, refused_functions
from tests.people.people_seed import jobs_warehouse

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NOT_ALLOWED = "is not allowed in ad-hoc SQL"


@pytest.fixture(scope="module")
def probed() -> dict[str, object]:
    done = subprocess.run([sys.executable, str(HERE / "sql_probe.py")], capture_output=True, text=True,
                          timeout=600, check=True)
    return dict(json.loads(done.stdout))


def test_every_function_that_runs_the_sql_it_is_given_is_refused(probed: dict[str, object]) -> None:
    fired = probed["fired"]
    assert isinstance(fired, dict)
    # The probe works: DuckDB 2.0 runs SQL given as text, as a table name and as a serialized tree.
    assert {"query", "query_table", "json_execute_serialized_sql"} <= set(fired)
    for name, sql in fired.items():
        with pytest.raises(QueryError, match=NOT_ALLOWED):
            check_statement(sql)
        for wrapped in (f"SELECT (SELECT count(*) FROM ({sql}))", f"WITH w AS ({sql}) SELECT * FROM w",
                        f"SELECT * FROM range(3) WHERE EXISTS ({sql})", f"EXPLAIN {sql}"):
            with pytest.raises(QueryError, match=NOT_ALLOWED):
                check_statement(wrapped)
        assert name


def overloads() -> list[tuple[str, str, int]]:
    con = duckdb.connect()
    return con.execute(
        "SELECT DISTINCT function_name, function_type, len(coalesce(parameters, [])) FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'table_macro', 'scalar', 'macro', 'aggregate') ORDER BY ALL"
    ).fetchall()


def test_the_guard_answers_for_every_function_duckdb_lists() -> None:
    refused = refused_functions(duckdb.connect())
    listed = overloads()
    assert len(listed) > 1000
    passed = 0
    for name, kind, arity in listed:
        table = kind in ("table", "table_macro")
        quoted = '"' + name.replace('"', '""') + '"'
        args = ", ".join(["NULL"] * arity)
        sql = f"SELECT * FROM {quoted}({args})" if table else f"SELECT {quoted}({args})"
        expected = (("table" if table else "scalar"), name.lower()) in refused
        try:
            check_statement(sql)
        except QueryError as exc:
            assert expected and NOT_ALLOWED in exc.message, (sql, exc.message)
            continue
        assert not expected, f"{sql} passed the guard"
        passed += 1
    # The family is refused, the rest of the catalogue is not: ad-hoc SQL keeps its functions.
    assert passed > len(listed) - 40


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jobs_warehouse(tmp_path_factory.mktemp("functions"))


def test_the_command_refuses_them_too(probed: dict[str, object], warehouse: Path) -> None:
    fired = probed["fired"]
    assert isinstance(fired, dict)
    for sql in [*fired.values(), "SELECT * FROM histogram_values('jobs', tier)", "SELECT * FROM checkpoint()"]:
        done = subprocess.run(
            [sys.executable, "-m", "preemptlens.cli", "--warehouse", str(warehouse), "sql", "--format", "csv", sql],
            capture_output=True, text=True, cwd=ROOT, timeout=120, env={**os.environ, "PREEMPTLENS_CONFIG": ""},
        )
        assert done.returncode != 0 and NOT_ALLOWED in done.stderr, (sql, done.stderr)
        assert done.stdout == "" and "Traceback" not in done.stderr
