"""Reading the warehouse while collectors write it: snapshots and guarded SQL.

DuckDB lets one process hold a database file: while a collector has the
warehouse open, no other process can open it, not even read-only, and a
reader holding it would in turn lock the collector out. So readers (the SQL
command, the dashboard, the report) never keep the warehouse open. They read
a snapshot, `<warehouse>.snapshot`, that the writer publishes after a commit:
DuckDB copies the database into a temporary file, which is then atomically
renamed over the old snapshot. A reader that has the old snapshot open keeps reading the old
file (POSIX rename), the next connection sees the new one, and a reader only
ever sees whole batches because the copy is taken between transactions.

When no writer is running and the snapshot is older than the warehouse (a
writer that did not publish), the reader refreshes the snapshot itself from a
short read-only connection.

Ad-hoc SQL is guarded by the engine, not by a regex: the snapshot is opened
read-only with external access (files, network, extensions) off and the
configuration locked, so COPY, ATTACH, INSTALL/LOAD, read_csv and SET fail in
DuckDB itself. On top, only one SELECT or EXPLAIN statement is accepted (that
also keeps temporary tables out), rows are capped and a query that runs past
its time limit is interrupted.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from preemptlens.config import Config, Section, Setting
from preemptlens.errors import PreemptlensError, SchemaError
from preemptlens.warehouse import SQL_DIR, copy_database, is_lock_error, snapshot_path

log = logging.getLogger(__name__)

SETTINGS = Section(
    "sql",
    "Limits of ad-hoc SQL (`preemptlens sql`, the dashboard's SQL box) and how readers wait for a writer.",
    (
        Setting("max_rows", 10_000, "Most rows an ad-hoc query returns; more are cut off with a notice.", kind=int),
        Setting("timeout_s", 30.0, "Seconds after which an ad-hoc query is interrupted.", kind=float),
        Setting("memory_limit", "2GB", "DuckDB memory limit of a reader connection."),
        Setting(
            "wait_s",
            30.0,
            "Seconds a reader waits for a writer to publish the first snapshot before it gives up.",
            kind=float,
        ),
    ),
)

_ALLOWED = {duckdb.StatementType.SELECT: "SELECT", duckdb.StatementType.EXPLAIN: "EXPLAIN"}


class QueryError(PreemptlensError):
    """An ad-hoc query was refused, failed or ran out of time."""


@dataclass(frozen=True)
class Limits:
    max_rows: int = 10_000
    timeout_s: float = 30.0
    memory_limit: str = "2GB"
    wait_s: float = 30.0

    @classmethod
    def from_config(cls, config: Config) -> Limits:
        section = config.section("sql")
        return cls(
            max_rows=int(section["max_rows"]),
            timeout_s=float(section["timeout_s"]),
            memory_limit=str(section["memory_limit"]),
            wait_s=float(section["wait_s"]),
        )


@dataclass(frozen=True)
class Result:
    frame: pl.DataFrame
    truncated: bool


def _newest_write(warehouse: Path) -> float:
    wal = Path(f"{warehouse}.wal")
    times = [warehouse.stat().st_mtime]
    if wal.exists():
        times.append(wal.stat().st_mtime)
    return max(times)


def _refresh_from_idle_warehouse(warehouse: Path) -> bool:
    """Copy an unlocked warehouse into a fresh snapshot; False if a writer holds it."""
    con = duckdb.connect()
    try:
        try:
            con.execute("ATTACH $path AS source (READ_ONLY)", {"path": str(warehouse)})
        except duckdb.Error as exc:
            if is_lock_error(exc):
                return False
            raise
        copy_database(con, "source", snapshot_path(warehouse))
        return True
    finally:
        con.close()


def current_snapshot(warehouse: str | Path, wait_s: float = 30.0) -> Path:
    """The snapshot to read: refreshed when the warehouse is newer and idle."""
    warehouse = Path(warehouse)
    if not warehouse.exists():
        raise SchemaError(
            f"warehouse {warehouse} does not exist",
            "run a collector, `preemptlens import` or `preemptlens demo` first",
        )
    target = snapshot_path(warehouse)
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        if target.exists() and target.stat().st_mtime >= _newest_write(warehouse):
            return target
        if _refresh_from_idle_warehouse(warehouse):
            return target
        # A writer holds the warehouse: its last published snapshot is consistent, if a little behind.
        if target.exists():
            return target
        if time.monotonic() >= deadline:
            raise QueryError(
                f"warehouse {warehouse} is being written by another process and has no snapshot yet",
                "wait for the collector to commit its first batch, or raise sql.wait_s",
            )
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


_CONFIGURE = threading.Lock()


def open_reader(warehouse: str | Path, limits: Limits | None = None) -> duckdb.DuckDBPyConnection:
    """A locked-down read-only connection to the current snapshot. Close it soon:
    a new snapshot is only seen by a new connection."""
    limits = limits or Limits()
    path = current_snapshot(warehouse, limits.wait_s)
    con = duckdb.connect(
        str(path),
        read_only=True,
        config={
            "enable_external_access": False,
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "memory_limit": limits.memory_limit,
        },
    )
    # A second reader of the same file in this process shares the database of
    # the first, whose settings are already set and locked; readers opening
    # at the same moment in two threads take turns to find out which they are.
    with _CONFIGURE:
        locked = con.execute("SELECT current_setting('lock_configuration')").fetchall()[0][0]
        if not locked:
            # The data contract is UTC; set before the lock, which freezes every setting.
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET lock_configuration = true")
    return con


def check_statement(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The one read statement in `sql`, or QueryError saying why it is refused."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"cannot parse the query: {_first_line(exc)}") from None
    if not statements:
        raise QueryError("the query is empty")
    if len(statements) > 1:
        raise QueryError(
            f"one statement at a time, got {len(statements)}",
            "run them one by one",
        )
    kind = statements[0].type
    if kind not in _ALLOWED:
        raise QueryError(
            f"only SELECT (or WITH ... SELECT, EXPLAIN) is allowed here, not {kind.name}",
            "ad-hoc SQL is read-only; use the preemptlens commands to change data",
        )
    return str(statements[0].query)


def run_query(con: duckdb.DuckDBPyConnection, sql: str, limits: Limits | None = None) -> Result:
    """Run one guarded read statement with a row cap and a time limit."""
    limits = limits or Limits()
    statement = check_statement(con, sql)
    timer = threading.Timer(limits.timeout_s, con.interrupt)
    timer.start()
    try:
        table = con.sql(statement).limit(limits.max_rows + 1).to_arrow_table()
    except duckdb.InterruptException:
        raise QueryError(
            f"the query ran longer than {limits.timeout_s:g} s and was stopped",
            "narrow it down (filter by time or cluster) or raise sql.timeout_s",
        ) from None
    except duckdb.PermissionException as exc:
        raise QueryError(
            f"refused: {_first_line(exc)}",
            "ad-hoc SQL cannot read or write files, attach databases or load extensions",
        ) from None
    except duckdb.Error as exc:
        raise QueryError(_first_line(exc)) from None
    finally:
        timer.cancel()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    truncated = frame.height > limits.max_rows
    return Result(frame.head(limits.max_rows), truncated)


def query(warehouse: str | Path, sql: str, limits: Limits | None = None) -> Result:
    """Open the current snapshot, run one guarded query, close."""
    limits = limits or Limits()
    con = open_reader(warehouse, limits)
    try:
        return run_query(con, sql, limits)
    finally:
        con.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# The example queries users run by name (`preemptlens sql -q NAME`, the dashboard's SQL page).
QUERIES_DIR = SQL_DIR / "queries"


def named_queries(directory: Path = QUERIES_DIR) -> dict[str, tuple[str, str]]:
    """name -> (one-line description from the header comment, SQL text)."""
    found = {}
    for path in sorted(directory.glob("*.sql")):
        text = path.read_text()
        header = [line[2:].strip() for line in text.splitlines() if line.startswith("--")]
        found[path.stem] = (header[0] if header else "", text)
    return found
