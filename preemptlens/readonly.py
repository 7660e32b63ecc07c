"""Reading the warehouse while collectors write it: snapshots and guarded SQL.

DuckDB lets one process hold a database file: while a collector has the
warehouse open, no other process can open it, not even read-only, and a
reader holding it would in turn lock the collector out. So readers (the SQL
command, the dashboard, the report) never keep the warehouse open. They read
a snapshot, `<warehouse>.snapshot`, that the writer publishes after a commit:
it checkpoints the database and copies the file into a temporary file, which
is then atomically renamed over the old snapshot. A reader that has the old snapshot open keeps reading the old
file (POSIX rename), the next connection sees the new one, and a reader only
ever sees whole batches because the copy is taken between transactions.

When no writer is running and the snapshot is older than the warehouse (a
writer that did not publish), the reader refreshes the snapshot itself from a
short read-only connection.

Ad-hoc SQL is guarded twice. Before it runs, DuckDB's own parser must find
exactly one SELECT-shaped statement (SELECT, WITH ... SELECT, VALUES, FROM,
SUMMARIZE, DESCRIBE, SHOW, or EXPLAIN [ANALYZE] of one of those), and its
serialized tree is walked at every nesting level for anything that is not a
query (a node of another kind, or a function such as query() that runs SQL
text the walk cannot see). Then it runs in a child process that opens the
snapshot read-only with external access (files, network, extensions) off and
the configuration locked, so COPY, ATTACH, INSTALL/LOAD, read_csv and SET fail
in DuckDB itself, with an address-space limit, a private temp directory
outside every path the database may touch, and caps on rows and bytes. The
parent kills the child at the deadline: a runaway scalar call that never
checks for an interrupt cannot hold a server thread or the machine's memory.
"""

from __future__ import annotations

import atexit
import io
import json
import logging
import math
import os
import re
import resource
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.connection import Connection
from multiprocessing.context import set_spawning_popen
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from preemptlens.config import parse_size, section, setting, size_text
from preemptlens.errors import PreemptlensError, SchemaError
from preemptlens.queryserver import CONTEXT
from preemptlens.warehouse import (
    SQL_DIR,
    copy_database,
    copy_file,
    has_wal,
    is_lock_error,
    remove_stale_publishes,
    snapshot_path,
)

log = logging.getLogger(__name__)


class QueryError(PreemptlensError):
    """An ad-hoc query was refused, failed or ran out of time."""


def size_bytes(text: str, setting: str) -> int:
    """'64MB', '4GiB' as bytes; QueryError naming the setting for anything else."""
    size = parse_size(text)
    if size is None:
        raise QueryError(f"{setting}: expected a size such as 64MB or 4GiB, got {text!r}")
    return size


# The floor of sql.address_space_limit, measured (tests/test_config_ranges.py runs queries at it): the fork
# server's child maps about 760 MB (the interpreter, DuckDB, Arrow) before it runs anything, and DuckDB needs
# about 100 MB more to open the snapshot and run a query on one thread; below 850 MB every query aborts.
MIN_ADDRESS_SPACE = 2**30
# What DuckDB needs to start, beyond what the query's process has mapped already (measured: about 96 MB).
_START_BYTES = 128 * 2**20
# What each further DuckDB thread may reserve: its stack (8 MiB by default) and, under glibc, a malloc arena of its
# own (64 MiB). Measured on 2 cores: 16 threads needed 860 MB more than 2.
_THREAD_BYTES = 72 * 2**20


def query_threads(space: int, mapped: int, cores: int) -> int:
    """DuckDB threads for a query process limited to `space` bytes of address space with `mapped` in use: one per
    core at most, and no more than fit in half of what is left after DuckDB's start (the other half for the
    query's data); at least one."""
    spare = space - mapped - _START_BYTES
    return max(1, min(cores, spare // 2 // _THREAD_BYTES))


def _mapped_bytes() -> int:
    """The address space this process maps now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@section("sql", "Limits of ad-hoc SQL (`preemptlens sql`, the dashboard's SQL box) and how readers wait for a writer.")
@dataclass(frozen=True)
class Limits:
    max_rows: int = setting(
        10_000, "Most rows an ad-hoc query returns; more are cut off with a notice.",
        bounds=(1, 10_000_000),
    )
    max_result_bytes: str = setting(
        "64MB",
        "Largest result (in Arrow memory) an ad-hoc query may return; a larger one is refused with a message.",
        check=size_text(1024, 64 * 2**30),
    )
    timeout_s: float = setting(
        30.0, "Seconds after which an ad-hoc query's process is killed; at least 5: starting the process and "
        "opening the snapshot took up to 0.5 s for `SELECT 1` on a loaded 2-core machine.",
        bounds=(5, 86_400),
    )
    memory_limit: str = setting(
        "2GB", "DuckDB memory limit of a reader connection.",
        check=size_text(64 * 2**20, 2**40),
    )
    address_space_limit: str = setting(
        "4GB",
        "Address-space limit (RLIMIT_AS) of the process that runs one ad-hoc query: DuckDB's memory_limit "
        "does not bound every allocation (a huge string), this does. At least 1GiB: the query's process maps "
        "about 760 MB before DuckDB starts. DuckDB runs as many threads as fit (each may reserve 72 MiB) with "
        "half of the rest left for the query's data, at most one per core.",
        check=size_text(MIN_ADDRESS_SPACE, 4 * 2**40),
    )
    wait_s: float = setting(
        30.0,
        "Seconds a reader waits for a writer to publish the first snapshot before it gives up.",
        bounds=(0, 3600),
    )

    def __post_init__(self) -> None:
        # A nonsense limit (a negative row cap, an infinite timeout) would switch the guard off.
        if isinstance(self.max_rows, bool) or not isinstance(self.max_rows, int) or self.max_rows < 1:
            raise QueryError(f"sql.max_rows must be a whole number of at least 1, got {self.max_rows!r}")
        for name in ("timeout_s", "wait_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0 or (
                name == "timeout_s" and value == 0
            ):
                raise QueryError(f"sql.{name} must be a finite number of seconds above 0, got {value!r}")
        for name in ("memory_limit", "max_result_bytes", "address_space_limit"):
            if size_bytes(getattr(self, name), f"sql.{name}") < 1:
                raise QueryError(f"sql.{name} must be above 0")


SETTINGS = Limits


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
    # Opened before the read-only attach takes DuckDB's shared lock and closed after it is released: closing
    # a descriptor of the file while attached would drop that lock and let a writer in mid-copy.
    handle = os.open(warehouse, os.O_RDONLY)
    try:
        try:
            con.execute("ATTACH $path AS source (READ_ONLY)", {"path": str(warehouse)})
        except duckdb.Error as exc:
            if is_lock_error(exc):
                return False
            raise
        remove_stale_publishes(warehouse)
        if has_wal(warehouse):
            # A writer ended without checkpointing: the file alone lacks its last transactions.
            copy_database(con, "source", snapshot_path(warehouse))
        else:
            copy_file(handle, snapshot_path(warehouse))
        return True
    finally:
        con.close()
        os.close(handle)


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
# A reader's spill files go here, never beside the snapshot: `<snapshot>.tmp` is a path
# the database itself may write, and it is also where a publish leaves its copy.
_TEMP_ROOT = Path(tempfile.gettempdir())


def _reader_config(limits: Limits, temp_directory: str) -> dict[str, Any]:
    return {
        "enable_external_access": False,
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "memory_limit": limits.memory_limit,
        "temp_directory": temp_directory,
    }


_PROCESS_TEMP: list[str] = []


def _process_temp() -> str:
    """One private spill directory per process for the in-process readers (the dashboard's charts),
    removed when the process exits."""
    with _CONFIGURE:
        if not _PROCESS_TEMP:
            made = tempfile.mkdtemp(prefix="preemptlens-reader-", dir=_TEMP_ROOT)
            atexit.register(shutil.rmtree, made, True)
            _PROCESS_TEMP.append(made)
        return _PROCESS_TEMP[0]


def open_reader(warehouse: str | Path, limits: Limits | None = None) -> duckdb.DuckDBPyConnection:
    """A locked-down read-only connection to the current snapshot, for the product's own queries.
    Close it soon: a new snapshot is only seen by a new connection. Ad-hoc SQL goes through query()."""
    limits = limits or Limits()
    return connect_snapshot(current_snapshot(warehouse, limits.wait_s), limits)


def connect_snapshot(path: Path, limits: Limits) -> duckdb.DuckDBPyConnection:
    """A locked-down read-only connection to the snapshot file `path`. Every in-process reader connects
    through here: DuckDB refuses a second connection to a file open in this process with another
    configuration (serve's /metrics beside its report job)."""
    con = duckdb.connect(str(path), read_only=True, config=_reader_config(limits, _process_temp()))
    # A second reader of the same file in this process shares the database of
    # the first, whose settings are already set and locked; readers opening
    # at the same moment in two threads take turns to find out which they are.
    with _CONFIGURE:
        locked = con.execute("SELECT current_setting('lock_configuration')").fetchall()[0][0]
        if not locked:
            # The data contract is UTC; set before the lock, which freezes every setting.
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET enable_progress_bar = false")
            con.execute("SET lock_configuration = true")
    return con


# -- the guard -------------------------------------------------------------

_READ_KINDS = ("SELECT", "WITH ... SELECT", "VALUES", "FROM", "SUMMARIZE", "DESCRIBE", "SHOW",
               "EXPLAIN [ANALYZE] of one of these")
_REFUSAL_HINT = "ad-hoc SQL is read-only; use the preemptlens commands to change data"
# Query nodes a SELECT's tree may hold at any depth.
_QUERY_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
# Functions that run SQL the walk cannot see (as text: query(), query_table(); as a serialized tree:
# json_execute_serialized_sql(); and any later member of the family), or that write (checkpoint()): refused
# by name at any depth, with every macro of DuckDB's that calls one (histogram_values calls query_table).
# (Files, network and extensions are refused by DuckDB itself: external access is off.)
_REFUSED_FAMILY = re.compile(r"(?:^|_)(?:sql|query|queries|execute|exec|checkpoint)(?:_|$)")
# The parser never sees data: an empty in-memory database with nothing to reach.
_PARSER: list[duckdb.DuckDBPyConnection] = []
_PARSE = threading.Lock()


# What `refused_functions` finds, as table functions and as functions called in an expression.
_REFUSED: list[Refused] = []


@dataclass(frozen=True)
class Refused:
    tables: frozenset[str]
    scalars: frozenset[str]

    def __contains__(self, call: tuple[str, str]) -> bool:
        kind, name = call
        return bool(_REFUSED_FAMILY.search(name)) or name in (self.tables if kind == "table" else self.scalars)


def _parser() -> duckdb.DuckDBPyConnection:
    if not _PARSER:
        con = duckdb.connect(config={"enable_external_access": False, "autoload_known_extensions": False})
        con.execute("SET lock_configuration = true")
        _REFUSED.append(refused_functions(con))
        _PARSER.append(con)
    return _PARSER[0]


def refused_functions(con: duckdb.DuckDBPyConnection) -> Refused:
    """The functions ad-hoc SQL may not call, of those `con` knows (duckdb_functions()): the family that runs
    SQL or writes (_REFUSED_FAMILY), and every macro whose definition calls one of them, however deep; apart
    for table functions and for functions of an expression, which may share a name (the histogram table
    macro reads a table by its name through query_table; the histogram aggregate is harmless)."""
    rows = con.execute(
        "SELECT DISTINCT lower(function_name), function_type IN ('table', 'table_macro'), "
        "lower(coalesce(macro_definition, '')) FROM duckdb_functions()"
    ).fetchall()
    refused = {(table, name) for name, table, _ in rows if _REFUSED_FAMILY.search(name)}
    while True:
        names = sorted({name for _, name in refused})
        calls = re.compile(r'(?<![\w.])"?(?:' + "|".join(map(re.escape, names)) + r')"?\s*\(')
        more = {(table, name) for name, table, definition in rows
                if (table, name) not in refused and definition and calls.search(definition)}
        if not more:
            break
        refused |= more
    return Refused(frozenset(n for t, n in refused if t), frozenset(n for t, n in refused if not t))


def _refuse(what: str) -> QueryError:
    return QueryError(f"only {', '.join(_READ_KINDS[:-1])} or {_READ_KINDS[-1]} is allowed here, not {what}",
                      _REFUSAL_HINT)


def _explained(sql: str) -> str:
    """The statement an EXPLAIN wraps: EXPLAIN [ANALYZE] [(options)] statement."""
    tokens = duckdb.tokenize(sql)
    words = [(pos, t) for pos, t in tokens if t != duckdb.token_type.comment]
    ends = [pos for pos, _ in words[1:]] + [len(sql)]
    i = 1  # words[0] is EXPLAIN
    if i < len(words) and sql[words[i][0]:ends[i]].strip().upper() == "ANALYZE":
        i += 1
    if i < len(words) and sql[words[i][0]:ends[i]].strip() == "(":
        after = sql[words[i + 1][0]:ends[i + 1]].strip().upper() if i + 1 < len(words) else ""
        if after not in ("SELECT", "WITH", "FROM", "VALUES", "(", "SUMMARIZE", "DESCRIBE", "SHOW", "PIVOT"):
            depth = 0
            while i < len(words):
                token = sql[words[i][0]:ends[i]].strip()
                depth += token.count("(") - token.count(")")
                i += 1
                if depth <= 0:
                    break
    return sql[words[i][0]:] if i < len(words) else ""


def _walk(tree: Any, found: set[tuple[str, str]], table: bool = False) -> None:
    """Every function called below `tree`, as ("table" or "scalar", name), refusing a node that is no query."""
    if isinstance(tree, dict):
        kind = tree.get("type")
        if isinstance(kind, str) and kind.endswith("_NODE") and kind not in _QUERY_NODES:
            raise _refuse(kind.removesuffix("_NODE").replace("_", " "))
        name = tree.get("function_name")
        if isinstance(name, str):
            found.add(("table" if table else "scalar", name.lower()))
        for key, value in tree.items():
            # A table function's own call is its "function"; its arguments are expressions again.
            _walk(value, found, table=kind == "TABLE_FUNCTION" and key == "function")
    elif isinstance(tree, list):
        for value in tree:
            _walk(value, found)


def _check_select(sql: str) -> None:
    with _PARSE:
        text = _parser().execute("SELECT json_serialize_sql($sql)", {"sql": sql}).fetchall()[0][0]
    tree = json.loads(text)
    if tree.get("error"):
        raise QueryError(f"cannot read the query: {tree.get('error_message', 'parse error')}")
    if len(tree.get("statements", [])) != 1:
        raise QueryError("one statement at a time", "run them one by one")
    functions: set[tuple[str, str]] = set()
    _walk(tree["statements"], functions)
    refused = sorted(name for kind, name in functions if (kind, name) in _REFUSED[0])
    if refused:
        raise QueryError(
            f"the function {refused[0]}() is not allowed in ad-hoc SQL (it runs SQL text or writes)",
            "write the query itself instead",
        )


def check_statement(sql: str, *, _depth: int = 0) -> str:
    """The one read statement in `sql`, or QueryError saying in one line why it is refused."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"cannot parse the query: {_first_line(exc)}") from None
    if not statements:
        raise QueryError("the query is empty")
    if len(statements) > 1:
        raise QueryError(f"one statement at a time, got {len(statements)}", "run them one by one")
    statement = statements[0]
    try:
        kind = statement.type
    except ValueError:
        # A statement kind newer than the Python enum (UPDATE EXTENSIONS): certainly not a read.
        raise _refuse(_leading_word(sql)) from None
    if kind == duckdb.StatementType.EXPLAIN and _depth == 0:
        inner = _explained(str(statement.query))
        if not inner.strip():
            raise QueryError("EXPLAIN of what? the statement after EXPLAIN is missing")
        check_statement(inner, _depth=1)
    elif kind == duckdb.StatementType.SELECT:
        _check_select(str(statement.query))
    else:
        raise _refuse(f"{kind.name}" + (" inside EXPLAIN" if _depth else ""))
    return str(statement.query)


def _leading_word(sql: str) -> str:
    words = re.findall(r"[A-Za-z_]+", sql)
    return " ".join(words[:2]).upper() if words else "this statement"


# -- the child process -----------------------------------------------------

# Children are forked from a server that has imported this module and nothing else: cheap to
# start (no interpreter start-up per query) and free of the parent's threads and open databases.
_CONTEXT = CONTEXT


class _Popen(popen_forkserver.Popen):
    """The fork server's launch, minus re-running the parent's __main__ in every child.

    multiprocessing re-imports the parent's main script in each child; under `streamlit run`
    that is Streamlit's command-line module, a second of imports per query. The child needs
    nothing from it: its target lives in this module, which the fork server has loaded."""

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_name", None)
        prep_data.pop("init_main_from_path", None)
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)  # type: ignore[attr-defined]
        parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))  # type: ignore[attr-defined]
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _Process(_CONTEXT.Process):  # type: ignore[name-defined]
    @staticmethod
    def _Popen(process_obj: Any) -> _Popen:
        return _Popen(process_obj)


def _child(path: str, statement: str, limits: Limits, temp_directory: str, out: Connection) -> None:
    """Run one checked statement and send ("ok", Arrow IPC bytes, truncated) or ("error", message, hint)."""
    space = size_bytes(limits.address_space_limit, "sql.address_space_limit")
    mapped = _mapped_bytes()
    if space < mapped + _START_BYTES:
        # A limit below what runs at all would abort the process (DuckDB's threads cannot start): say so.
        out.send(("error", f"sql.address_space_limit ({limits.address_space_limit}) is below what the query's "
                  f"process needs: it maps {mapped / 2**20:,.0f} MiB before DuckDB starts, which needs about "
                  f"{_START_BYTES >> 20} MiB more", "raise sql.address_space_limit"))
        out.close()
        return
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    # The answer goes through the pipe only: nothing the engine prints (its progress bar after 2 s) may end up
    # in the caller's output, which may be CSV or JSON.
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 1)
    try:
        config = {**_reader_config(limits, temp_directory),
                  "threads": query_threads(space, mapped, os.cpu_count() or 1)}
        con = duckdb.connect(path, read_only=True, config=config)
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_progress_bar = false")
        con.execute("SET lock_configuration = true")
        table = con.sql(statement).limit(limits.max_rows + 1).to_arrow_table()
        truncated = table.num_rows > limits.max_rows
        table = table.slice(0, limits.max_rows)
        cap = size_bytes(limits.max_result_bytes, "sql.max_result_bytes")
        if table.nbytes > cap:
            out.send(("error", f"the result holds {table.nbytes:,} bytes, more than sql.max_result_bytes "
                      f"({limits.max_result_bytes})", "select fewer columns or rows, or raise sql.max_result_bytes"))
            return
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        out.send(("ok", sink.getvalue().to_pybytes(), truncated))
    except duckdb.PermissionException as exc:
        out.send(("error", f"refused: {_first_line(exc)}",
                  "ad-hoc SQL cannot read or write files, attach databases or load extensions"))
    except (duckdb.OutOfMemoryException, MemoryError):
        out.send(("error", f"the query needs more memory than sql.memory_limit ({limits.memory_limit}) / "
                  f"sql.address_space_limit ({limits.address_space_limit}) allow",
                  "narrow it down (filter by time or cluster)"))
    except duckdb.Error as exc:
        out.send(("error", _first_line(exc), ""))
    finally:
        out.close()


def _run_in_child(path: Path, statement: str, limits: Limits) -> Result:
    temp_directory = tempfile.mkdtemp(prefix="preemptlens-sql-", dir=_TEMP_ROOT)
    receive, send = _CONTEXT.Pipe(duplex=False)
    child = _Process(target=_child, args=(str(path), statement, limits, temp_directory, send), daemon=True)
    try:
        child.start()
        send.close()
        if not receive.poll(limits.timeout_s):
            raise QueryError(
                f"the query ran longer than {limits.timeout_s:g} s and was stopped",
                "narrow it down (filter by time or cluster) or raise sql.timeout_s",
            )
        try:
            message = receive.recv()
        except EOFError:
            child.join(5)
            raise QueryError(
                f"the query's process ended without an answer (exit status {child.exitcode}), most likely out "
                f"of memory (sql.address_space_limit = {limits.address_space_limit})",
                "narrow it down (filter by time or cluster)",
            ) from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        child.close()
        receive.close()
        shutil.rmtree(temp_directory, ignore_errors=True)
    if message[0] == "error":
        raise QueryError(message[1], message[2])
    table = pa.ipc.open_stream(message[1]).read_all()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return Result(frame, message[2])


def query(warehouse: str | Path, sql: str, limits: Limits | None = None) -> Result:
    """Run one guarded ad-hoc query over the current snapshot in a child process killed at the deadline."""
    limits = limits or Limits()
    statement = check_statement(sql)
    path = current_snapshot(warehouse, limits.wait_s)
    return _run_in_child(path, statement, limits)


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
