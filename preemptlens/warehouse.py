"""The DuckDB warehouse: connection, migrations and the one load API.

Everything that writes raw data (collectors, the importer, the simulator)
goes through `Warehouse.load_batch`: validate against the contract, upsert on
the natural key, quarantine what is invalid, move the watermarks, all in one
transaction, and report what happened.
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from preemptlens.contract import FUTURE_SLACK_S, MAX_EPOCH_S, RULES, Batch, Reject, Watermark, value_checks
from preemptlens.errors import ContractError, SchemaError
from preemptlens.private import create_new, make_private, private_umask

log = logging.getLogger(__name__)

SQL_DIR = Path(__file__).parent / "sql"
# The named functions the shared SQL (sql/scans, sql/views) calls: one definition both engines run, and
# DuckDB's forms of those that differ by dialect (sql/functions/spark.sql is Spark's).
FUNCTIONS_DIR = SQL_DIR / "functions"
# Spark's `CREATE ... FUNCTION name(arg TYPE, ...) RETURNS TYPE RETURN body`, which DuckDB writes as a macro.
_SHARED_FUNCTION = re.compile(
    r"CREATE OR REPLACE TEMPORARY FUNCTION (\w+)\(([^)]*)\) RETURNS \S+ RETURN", re.IGNORECASE
)
_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# Columns the load API fills itself; collectors never set them.
_BOOKKEEPING = ("source", "_load_id")
# Defaults of NOT NULL columns a frame may leave out (as in sql/schema).
_DEFAULTS: dict[str, object] = {"gpu_instance": ""}
# Optional column a collector may add to name each row's origin (file:line ...)
# in quarantine; it is never stored with the row.
RECORD_COLUMN = "_record"

_POLARS_TYPES: dict[str, pl.DataType] = {
    "VARCHAR": pl.String(),
    "INTEGER": pl.Int32(),
    "BIGINT": pl.Int64(),
    "DOUBLE": pl.Float64(),
    "BOOLEAN": pl.Boolean(),
    "TIMESTAMP WITH TIME ZONE": pl.Datetime("us", "UTC"),
}
# ISO 8601 with or without offset (naive means UTC), with space or T, or a bare date.
_TIME_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f%#z",
    "%Y-%m-%d %H:%M:%S%.f%#z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%d",
)
_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0")


@functools.cache
def query_sql(folder: str, name: str) -> str:
    """sql/<folder>/<name>.sql: a named query of Python code (replay, tuning), kept beside the views."""
    return (SQL_DIR / folder / f"{name}.sql").read_text()


def define_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Create the functions the shared SQL calls in this connection (temporary: nothing is stored)."""

    def macro(m: re.Match[str]) -> str:
        names = ", ".join(arg.split()[0] for arg in m.group(2).split(","))
        return f"CREATE OR REPLACE TEMP MACRO {m.group(1)}({names}) AS"

    con.execute(_SHARED_FUNCTION.sub(macro, (FUNCTIONS_DIR / "shared.sql").read_text()))
    con.execute((FUNCTIONS_DIR / "duckdb.sql").read_text())


def migrations(sql_dir: Path = SQL_DIR) -> list[tuple[int, Path]]:
    found = []
    for path in sorted((sql_dir / "schema").glob("*.sql")):
        match = _MIGRATION.match(path.name)
        if not match:
            raise SchemaError(
                f"{path}: migration files are named NNNN_name.sql",
                "rename the file, e.g. 0003_add_allocations.sql",
            )
        found.append((int(match.group(1)), path))
    versions = [v for v, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise SchemaError(f"migrations in {sql_dir / 'schema'} are not numbered 1..N: {versions}")
    return found


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    nullable: bool

    @property
    def dtype(self) -> pl.DataType:
        return _POLARS_TYPES[self.sql_type]


@dataclass
class TableReport:
    loaded: int = 0
    unchanged: int = 0
    quarantined: int = 0


@dataclass
class LoadReport:
    load_id: str
    source: str
    tables: dict[str, TableReport] = field(default_factory=dict)

    def _total(self, attr: str) -> int:
        return sum(getattr(t, attr) for t in self.tables.values())

    @property
    def loaded(self) -> int:
        return self._total("loaded")

    @property
    def unchanged(self) -> int:
        return self._total("unchanged")

    @property
    def quarantined(self) -> int:
        return self._total("quarantined")

    def add(self, other: LoadReport) -> None:
        """Count another load's rows into this report, table by table."""
        for table, rep in other.tables.items():
            mine = self.tables.setdefault(table, TableReport())
            mine.loaded += rep.loaded
            mine.unchanged += rep.unchanged
            mine.quarantined += rep.quarantined


def quote(identifier: str) -> str:
    """Quote an SQL identifier; the one place identifiers enter SQL text."""
    return '"' + identifier.replace('"', '""') + '"'


# Readers never open the warehouse itself: while a process holds it for
# writing no other process may open it, and a reader holding it would block
# the collectors. Writers publish a read-only copy, `<warehouse>.snapshot`,
# between transactions; preemptlens.readonly opens that.
SNAPSHOT_SUFFIX = ".snapshot"


def snapshot_path(warehouse: str | Path) -> Path:
    return Path(f"{warehouse}{SNAPSHOT_SUFFIX}")


def is_lock_error(exc: duckdb.Error) -> bool:
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


def copy_database(con: duckdb.DuckDBPyConnection, source: str, target: Path) -> None:
    """Copy the attached database `source` into a new file that then replaces `target`, re-encoding every table.

    The slow way (seconds per hundred MB): used only when the file on disk does not hold every committed
    transaction yet (a write-ahead log remains), see copy_file. DuckDB copies through its own open handle:
    opening the warehouse file a second time in the writer and closing it would drop the writer's POSIX
    lock (fcntl locks belong to the process, and any close releases them), letting readers in while it writes.
    """
    temp = _publish_temp(target)
    try:
        con.execute("ATTACH $path AS _snapshot_copy", {"path": str(temp)})
        try:
            con.execute(f"COPY FROM DATABASE {quote(source)} TO _snapshot_copy")
        finally:
            # Detaching checkpoints the copy into its file.
            con.execute("DETACH _snapshot_copy")
        _install(temp, target)
    finally:
        temp.unlink(missing_ok=True)
        Path(f"{temp}.wal").unlink(missing_ok=True)


def copy_file(handle: int, target: Path) -> None:
    """Copy the database file open as `handle` byte for byte into a new file that then replaces `target`.

    Only for a file that holds every committed transaction (checkpointed, no write-ahead log) and that nobody
    writes meanwhile (this process holds DuckDB's lock on it and is between transactions). `handle` stays open
    for as long as DuckDB holds the file: closing any descriptor of it would drop DuckDB's lock (see
    copy_database). The kernel copies (copy_file_range: shared extents where the file system has them).
    """
    temp = _publish_temp(target)
    size = os.fstat(handle).st_size
    # A new private file, never one planted under the name (the warehouse's folder may be open to others).
    out = create_new(temp)
    try:
        try:
            done = 0
            while done < size:
                copied = os.copy_file_range(handle, out, size - done, done, done)
                if copied == 0:
                    break
                done += copied
        except (AttributeError, OSError):
            # No copy_file_range here (or not between these file systems): read and write.
            done = 0
        while done < size:
            chunk = os.pread(handle, min(8 << 20, size - done), done)
            if not chunk:
                break
            done += os.pwrite(out, chunk, done)
        if done != size:
            raise SchemaError(f"cannot publish the snapshot {target}: the warehouse file changed size while copied")
        os.fsync(out)
        os.close(out)
        out = -1
        _install(temp, target)
    finally:
        if out >= 0:
            os.close(out)
        temp.unlink(missing_ok=True)


def _publish_temp(target: Path) -> Path:
    temp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temp.unlink(missing_ok=True)
    return temp


def _install(temp: Path, target: Path) -> None:
    """Make the finished copy `temp` the snapshot, durably, readable by the service's user only."""
    make_private(temp)
    with open(temp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(temp, target)
    # The rename itself is only durable once the directory entry is on disk.
    _fsync_directory(target.parent)


def has_wal(database: str | Path) -> bool:
    """Whether committed transactions of `database` still sit in its write-ahead log, not in the file."""
    try:
        return os.stat(f"{database}.wal").st_size > 0
    except FileNotFoundError:
        return False


def _fsync_directory(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_PUBLISH_TEMP = re.compile(r"\.(\d+)\.\d+\.tmp(\.wal)?$")


def remove_stale_publishes(warehouse: str | Path) -> list[Path]:
    """Delete the copies of publishes that were interrupted (the process was killed mid-copy):
    `<snapshot>.<pid>.<tid>.tmp` and its `.wal`, whose process no longer runs. A live
    process's copy is left alone; it may be publishing right now."""
    target = snapshot_path(warehouse)
    removed = []
    for path in target.parent.glob(f"{glob.escape(target.name)}.*.tmp*"):
        match = _PUBLISH_TEMP.search(path.name[len(target.name):])
        if match is None or _process_runs(int(match.group(1))):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def publish_snapshot(con: duckdb.DuckDBPyConnection, warehouse: str | Path, handle: int | None = None) -> Path:
    """Publish the committed state of the warehouse that `con` holds open for writing.

    Call it between transactions (after a commit): the copy then holds whole transactions only. With
    `handle` (a descriptor of the warehouse file kept open while `con` holds it) the checkpointed file is
    copied as it is; without one, or should a checkpoint leave a write-ahead log, DuckDB re-encodes it.
    """
    target = snapshot_path(warehouse)
    if handle is not None:
        con.execute("CHECKPOINT")
        if not has_wal(warehouse):
            copy_file(handle, target)
            return target
    database = con.execute("SELECT current_database()").fetchall()[0][0]
    copy_database(con, str(database), target)
    return target


class Warehouse:
    """An open warehouse. Read-write instances migrate the schema on open."""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        publish_every_s: float = 60.0,
        lock_wait_s: float = 15.0,
        future_slack_s: float = FUTURE_SLACK_S,
    ) -> None:
        self.path = str(path)
        # How far past now a loaded time may lie (warehouse.future_slack_s).
        self.future_slack_s = future_slack_s
        self.read_only = read_only
        self.publish_every_s = publish_every_s
        if read_only and self.path != ":memory:" and not Path(self.path).exists():
            raise SchemaError(
                f"warehouse {self.path} does not exist",
                "run a collector, `preemptlens import` or `preemptlens demo` first",
            )
        if not read_only and self.path != ":memory:":
            private_umask()
        self.con = self._connect(lock_wait_s)
        # A descriptor of the file, held as long as DuckDB holds it, to publish the snapshot by copying the
        # file: opened after DuckDB's lock is taken and closed after DuckDB lets go (see copy_file).
        self._handle: int | None = None
        if not read_only and self.path != ":memory:":
            for made in (self.path, f"{self.path}.wal", snapshot_path(self.path)):
                make_private(made)
            self._handle = os.open(self.path, os.O_RDONLY)
            # The writer's lock is held now: no other writer is publishing this warehouse.
            for stale in remove_stale_publishes(self.path):
                log.info("removed %s, left by an interrupted snapshot publish", stale)
        self._dirty = False
        self._published_at = time.monotonic()
        # The data contract is UTC; never let the host's zone leak into results.
        self.con.execute("SET TimeZone = 'UTC'")
        define_functions(self.con)
        if read_only:
            self._check_version()
        else:
            self.migrate()
        self._columns: dict[str, list[Column]] = {}

    def _connect(self, lock_wait_s: float) -> duckdb.DuckDBPyConnection:
        # A reader refreshing the snapshot holds the file for a moment; wait it out.
        deadline = time.monotonic() + lock_wait_s
        while True:
            try:
                return duckdb.connect(self.path, read_only=self.read_only)
            except duckdb.IOException as exc:
                if not is_lock_error(exc) or time.monotonic() >= deadline:
                    raise SchemaError(
                        f"warehouse {self.path} is locked by another process",
                        "only one process may write at a time; readers use `preemptlens sql` "
                        "or the dashboard, which read the published snapshot",
                    ) from exc
                time.sleep(0.2)

    def publish(self) -> None:
        """Publish the committed state for readers (between transactions only)."""
        if self.read_only or self.path == ":memory:":
            return
        publish_snapshot(self.con, self.path, self._handle)
        self._dirty = False
        self._published_at = time.monotonic()

    def mark_changed(self) -> None:
        """Written outside load_batch (derived tables): publish the snapshot on close."""
        self._dirty = True

    def close(self) -> None:
        try:
            if self._dirty:
                self.publish()
            self.con.close()
        finally:
            if self._handle is not None:
                os.close(self._handle)
                self._handle = None

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema -----------------------------------------------------------

    def schema_version(self) -> int:
        exists = self._scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = '_schema_version'")
        if not exists:
            return 0
        version = self._scalar("SELECT coalesce(max(version), 0) FROM _schema_version")
        return int(version) if isinstance(version, int) else 0

    def _scalar(self, sql: str, params: dict[str, object] | None = None) -> object:
        # Fetch every row: DuckDB refuses further work on a connection whose
        # last result was only partly read.
        rows = self.con.execute(sql, params or {}).fetchall()
        return rows[0][0] if rows else None

    def _check_version(self) -> int:
        current = self.schema_version()
        known = len(migrations())
        if current > known:
            raise SchemaError(
                f"warehouse {self.path} has schema version {current}, newer than this preemptlens knows ({known})",
                "upgrade preemptlens, or point --warehouse at another file",
            )
        return current

    def migrate(self) -> list[int]:
        """Apply the migrations this warehouse lacks; return their versions."""
        current = self._check_version()
        applied = []
        for version, path in migrations():
            if version <= current:
                continue
            with self.transaction():
                if version == 1:
                    self.con.execute(
                        "CREATE TABLE IF NOT EXISTS _schema_version ("
                        "version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
                        "applied_at TIMESTAMPTZ NOT NULL)"
                    )
                self.con.execute(path.read_text())
                self.con.execute(
                    "INSERT INTO _schema_version VALUES ($v, $n, $t)",
                    {"v": version, "n": path.name, "t": datetime.now(UTC)},
                )
            applied.append(version)
            self._dirty = True
        self._columns = {}
        return applied

    def columns(self, table: str) -> list[Column]:
        if table not in self._columns:
            rows = self.con.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_name = $t ORDER BY ordinal_position",
                {"t": table},
            ).fetchall()
            if not rows:
                raise ContractError(f"no table {table!r} in the warehouse schema")
            self._columns[table] = [Column(n, t, nullable == "YES") for n, t, nullable in rows]
        return self._columns[table]

    def input_columns(self, table: str) -> list[str]:
        """The columns a source may give for `table`: all but those the load API fills."""
        return [c.name for c in self.columns(table) if c.name not in _BOOKKEEPING]

    # -- transactions -----------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    # -- reading ----------------------------------------------------------

    def query(self, sql: str, params: dict[str, object] | None = None) -> pl.DataFrame:
        relation = self.con.sql(sql, params=params) if params else self.con.sql(sql)
        result = pl.from_arrow(relation.to_arrow_table())
        assert isinstance(result, pl.DataFrame)
        return result

    def watermarks(self, collector: str) -> dict[tuple[str, str], str]:
        rows = self.con.execute(
            "SELECT cluster, stream, cursor FROM _watermarks WHERE collector = $c",
            {"c": collector},
        ).fetchall()
        return {(cluster, stream): cursor for cluster, stream, cursor in rows}

    def recorded_runs(self, since: datetime) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The runs on at or after `since` (still running, or ended since) with their jobs' fields, and every
        label that names one of those jobs besides its id (sql/attribution/job_labels.sql): what a
        collector of contract.UsesRuns maps its records to jobs by."""
        runs = self.query(
            "SELECT r.cluster, r.job_id, r.run, r.start_time, r.end_time, j.user_name, j.team, j.name, "
            "j.work_dir, j.stdout_path, j.stderr_path, j.source "
            "FROM job_runs AS r JOIN jobs AS j USING (cluster, job_id) "
            "WHERE r.start_time IS NOT NULL AND (r.end_time IS NULL OR r.end_time >= $since) "
            "ORDER BY r.cluster, r.job_id, r.run",
            {"since": since},
        )
        labels = self.query(
            f"SELECT l.cluster, l.label, l.job_id FROM ({query_sql('attribution', 'job_labels')}) AS l "
            "SEMI JOIN (SELECT DISTINCT cluster, job_id FROM job_runs "
            "WHERE start_time IS NOT NULL AND (end_time IS NULL OR end_time >= $since)) AS k "
            "ON k.cluster = l.cluster AND k.job_id = l.job_id",
            {"since": since},
        )
        return runs, labels

    # -- loading ----------------------------------------------------------

    def load(self, table: str, frame: pl.DataFrame, source: str) -> LoadReport:
        return self.load_batch(Batch(source=source, frames={table: frame}))

    def load_batch(self, batch: Batch) -> LoadReport:
        """Validate, upsert, quarantine and move watermarks in one transaction."""
        load_id = uuid.uuid4().hex
        report = LoadReport(load_id=load_id, source=batch.source)
        started = datetime.now(UTC)
        prepared = []
        rejects = list(batch.rejects)
        for table, frame in batch.frames.items():
            good, bad = self._validate(table, frame, batch.source)
            prepared.append((table, good))
            rejects.extend(bad)
        with self.transaction():
            for table, good in prepared:
                loaded, unchanged = self._merge(table, good, batch.source, load_id)
                rep = report.tables.setdefault(table, TableReport())
                rep.loaded += loaded
                rep.unchanged += unchanged
            for reject in rejects:
                report.tables.setdefault(reject.table, TableReport()).quarantined += 1
            if rejects:
                self._quarantine(rejects, batch.source, load_id)
            self._set_watermarks(batch.watermarks)
            self.con.execute(
                "INSERT INTO _loads VALUES ($id, $src, $start, $end, $l, $u, $q)",
                {
                    "id": load_id,
                    "src": batch.source,
                    "start": started,
                    "end": datetime.now(UTC),
                    "l": report.loaded,
                    "u": report.unchanged,
                    "q": report.quarantined,
                },
            )
        self._dirty = True
        if time.monotonic() - self._published_at >= self.publish_every_s:
            self.publish()
        return report

    def _validate(self, table: str, frame: pl.DataFrame, source: str) -> tuple[pl.DataFrame, list[Reject]]:
        if table not in RULES:
            raise ContractError(f"{source}: no raw table {table!r} in the contract")
        rules = RULES[table]
        columns = [c for c in self.columns(table) if c.name not in _BOOKKEEPING]
        names = {c.name for c in columns}
        unknown = set(frame.columns) - names - {RECORD_COLUMN}
        if unknown:
            raise ContractError(
                f"{source}: columns {sorted(unknown)} are not in table {table}",
                f"the contract's columns are {sorted(names)}",
            )
        missing_required = [
            c.name for c in columns if not c.nullable and c.name not in frame.columns and c.name not in _DEFAULTS
        ]
        if missing_required:
            raise ContractError(f"{source}: frame for {table} lacks required columns {missing_required}")
        if frame.height == 0:
            return frame.clear(), []

        given_record = [pl.col(RECORD_COLUMN).cast(pl.String)] if RECORD_COLUMN in frame.columns else []

        casts = []
        problems: list[tuple[str, pl.Expr, str]] = []
        for col in columns:
            if col.name not in frame.columns:
                casts.append(pl.lit(_DEFAULTS.get(col.name), dtype=col.dtype).alias(col.name))
                continue
            cast = _cast(frame.schema[col.name], col)
            if col.name in _DEFAULTS:
                cast = cast.fill_null(_DEFAULTS[col.name])
            casts.append(cast.alias(col.name))
            problems.append(
                (
                    col.name,
                    pl.col(f"__raw_{col.name}").is_not_null() & pl.col(col.name).is_null(),
                    f"cannot be read as {col.sql_type}",
                )
            )
        raw_copies = [pl.col(c.name).alias(f"__raw_{c.name}") for c in columns if c.name in frame.columns]
        typed = frame.select([*raw_copies, *given_record, *casts])
        for col in columns:
            if not col.nullable:
                problems.append((col.name, pl.col(col.name).is_null(), "is required"))
        now = datetime.now(UTC)
        for col in columns:
            for check in value_checks(col.name, col.dtype, now, self.future_slack_s):
                problems.append((check.column, ~check.ok.fill_null(True), check.reason))
        for check in rules.checks:
            problems.append((check.column, ~check.ok.fill_null(True), check.reason))

        # The first failing field of each row names the reason it is quarantined; only the rows that fail
        # somewhere (few, usually none) are told which. Each check is one flag column, read back as a matrix:
        # a chain of when/then over every check costs far more to plan than the rows cost to check.
        flags = (
            typed.select([failed.fill_null(False).alias(f"__failed_{i}") for i, (_, failed, _) in enumerate(problems)])
            .to_numpy()
            .astype(bool, copy=False)
            if problems
            else np.zeros((typed.height, 0), dtype=bool)
        )
        failing = flags.any(axis=1)
        rejects = []
        if failing.any():
            first = flags[failing].argmax(axis=1)
            bad = typed.filter(pl.Series(failing))
            if not given_record:
                # Named by its key as the source gave it; built for rejected rows only.
                bad = bad.with_columns(
                    pl.concat_str(
                        [
                            pl.lit(f"{k}=") + pl.col(f"__raw_{k}").cast(pl.String).fill_null("")
                            for k in rules.key
                            if f"__raw_{k}" in bad.columns
                        ],
                        separator=" ",
                    ).alias(RECORD_COLUMN)
                )
            raw_names = [c for c in bad.columns if c.startswith("__raw_")]
            # Only the text columns: a typed value may not convert to Python (a time in year 0).
            for row, which in zip(bad.select(RECORD_COLUMN, *raw_names).iter_rows(named=True), first, strict=True):
                name, _, reason = problems[which]
                raw = {c.name: row.get(f"__raw_{c.name}") for c in columns if f"__raw_{c.name}" in row}
                rejects.append(
                    Reject(
                        table=table,
                        record=row[RECORD_COLUMN],
                        field=name,
                        reason=_describe(name, reason, row.get(f"__raw_{name}")),
                        raw=_raw_text(raw),
                    )
                )
            good = typed.filter(pl.Series(~failing))
        else:
            good = typed
        good = good.select([c.name for c in columns])
        # Within one batch the last record of a key wins, as a later load would. A batch whose keys only
        # ever increase (a collector's sorted page) holds no key twice.
        if not _strictly_increasing(good, rules.key):
            good = good.unique(subset=list(rules.key), keep="last", maintain_order=True)
        return good, rejects

    def _merge(self, table: str, good: pl.DataFrame, source: str, load_id: str) -> tuple[int, int]:
        if good.height == 0:
            return 0, 0
        rules = RULES[table]
        cols = self.input_columns(table)
        self.con.register("_incoming", good.to_arrow())
        try:
            target = f"(SELECT * FROM {quote(table)}"
            bounds: dict[str, object] = {}
            if rules.range_column:
                rc = rules.range_column
                bounds = {"lo": good[rc].min(), "hi": good[rc].max()}
                target += f" WHERE {quote(rc)} BETWEEN $lo AND $hi"
            target += ")"
            on = " AND ".join(f"s.{quote(k)} = t.{quote(k)}" for k in rules.key)
            col_list = ", ".join(quote(c) for c in [*cols, "source"])
            # A range with nothing stored in it (the usual new page of samples) needs no join to say so.
            stored = not rules.range_column or self._scalar(f"SELECT EXISTS (SELECT 1 FROM {target})", bounds)
            if not stored or not self._scalar(
                f"SELECT EXISTS (SELECT 1 FROM _incoming s JOIN {target} t ON {on})", bounds
            ):
                # No incoming key is stored yet (a first load, a backfill): every
                # row is new, and the join and comparison below would only say
                # so, at more than the cost of the insert itself.
                self.con.execute(
                    f"INSERT INTO {quote(table)} ({col_list}, _load_id) "
                    f"SELECT {', '.join(quote(c) for c in cols)}, $source, $load_id FROM _incoming",
                    {"source": source, "load_id": load_id},
                )
                return good.height, 0
            # A sticky column keeps its stored value when a later, less complete
            # view of the same record leaves it NULL.
            value = {
                c: f"coalesce(s.{quote(c)}, t.{quote(c)})" if c in rules.sticky else f"s.{quote(c)}" for c in cols
            } | {"source": "$source::VARCHAR"}
            same = " AND ".join(f"{v} IS NOT DISTINCT FROM t.{quote(c)}" for c, v in value.items())
            first_key = quote(rules.key[0])
            self.con.execute(
                "CREATE OR REPLACE TEMP TABLE _merge AS SELECT "
                + ", ".join(f"{v} AS {quote(c)}" for c, v in value.items())
                + f", t.{first_key} IS NOT NULL AS _exists, "
                f"coalesce(t.{first_key} IS NOT NULL AND {same}, false) AS _same "
                f"FROM _incoming s LEFT JOIN {target} t ON {on}",
                bounds | {"source": source},
            )
            changed, unchanged, replaced = (
                int(x)
                for x in self.con.execute(
                    "SELECT count(*) FILTER (WHERE NOT _same), count(*) FILTER (WHERE _same), "
                    "count(*) FILTER (WHERE _exists AND NOT _same) FROM _merge"
                ).fetchall()[0]
            )
            if replaced:
                key_match = " AND ".join(f"m.{quote(k)} = {quote(table)}.{quote(k)}" for k in rules.key)
                self.con.execute(
                    f"DELETE FROM {quote(table)} USING (SELECT * FROM _merge "
                    f"WHERE _exists AND NOT _same) m WHERE {key_match}"
                )
            if changed:
                self.con.execute(
                    f"INSERT INTO {quote(table)} ({col_list}, _load_id) "
                    f"SELECT {col_list}, $load_id FROM _merge WHERE NOT _same",
                    {"load_id": load_id},
                )
            self.con.execute("DROP TABLE _merge")
        finally:
            self.con.unregister("_incoming")
        return changed, unchanged

    def _quarantine(self, rejects: Sequence[Reject], source: str, load_id: str) -> None:
        frame = pl.DataFrame(
            {
                "source": [source] * len(rejects),
                "target_table": [r.table for r in rejects],
                "record": [r.record for r in rejects],
                "field": [r.field for r in rejects],
                "reason": [r.reason for r in rejects],
                "raw": [r.raw for r in rejects],
            },
            schema={k: pl.String for k in ("source", "target_table", "record", "field", "reason", "raw")},
        ).unique(subset=["source", "target_table", "record"], keep="last", maintain_order=True)
        self.con.register("_rejects", frame.to_arrow())
        try:
            self.con.execute(
                "DELETE FROM quarantine q USING _rejects r WHERE q.source = r.source "
                "AND q.target_table = r.target_table AND q.record = r.record "
                "AND (q.field, q.reason, q.raw) IS DISTINCT FROM (r.field, r.reason, r.raw)"
            )
            self.con.execute(
                "INSERT INTO quarantine SELECT r.*, $load_id FROM _rejects r "
                "ANTI JOIN quarantine q ON q.source = r.source "
                "AND q.target_table = r.target_table AND q.record = r.record",
                {"load_id": load_id},
            )
        finally:
            self.con.unregister("_rejects")

    def _set_watermarks(self, marks: Sequence[Watermark]) -> None:
        now = datetime.now(UTC)
        for m in marks:
            self.con.execute(
                "INSERT INTO _watermarks VALUES ($c, $cl, $s, $cur, $t) "
                "ON CONFLICT (collector, cluster, stream) DO UPDATE SET "
                "cursor = excluded.cursor, updated_at = excluded.updated_at",
                {"c": m.collector, "cl": m.cluster, "s": m.stream, "cur": m.cursor, "t": now},
            )


def _strictly_increasing(frame: pl.DataFrame, key: Sequence[str]) -> bool:
    """Whether every row's key is greater than the one before (compared column by column): then no key is
    there twice. An order the comparison cannot tell (NaN, a NULL) reads as not increasing."""
    if frame.height < 2:
        return True
    later: pl.Expr = pl.lit(False)
    for name in reversed(key):
        now, before = pl.col(name), pl.col(name).shift()
        later = (now > before) | ((now == before) & later)
    return bool(frame.select(later.slice(1).fill_null(False).all()).item())


def _cast(source_type: pl.DataType, col: Column) -> pl.Expr:
    expr = pl.col(col.name)
    target = col.dtype
    if source_type == target:
        return expr
    if isinstance(target, pl.Datetime):
        if source_type == pl.String:
            stripped = expr.str.strip_chars()
            return pl.coalesce(
                [
                    *(
                        stripped.str.to_datetime(format=f, strict=False, time_zone="UTC", time_unit="us")
                        for f in _TIME_FORMATS
                    ),
                    _from_epoch(stripped.cast(pl.Float64, strict=False)),
                ]
            )
        if isinstance(source_type, pl.Datetime):
            if source_type.time_zone is None:
                # The contract is UTC; a naive time from a source is taken as UTC.
                return expr.dt.replace_time_zone("UTC").dt.cast_time_unit("us")
            return expr.dt.convert_time_zone("UTC").dt.cast_time_unit("us")
        if source_type.is_numeric():
            return _from_epoch(expr.cast(pl.Float64))
        return pl.lit(None, dtype=target)
    if isinstance(target, pl.Boolean) and source_type == pl.String:
        lowered = expr.str.strip_chars().str.to_lowercase()
        return (
            pl.when(lowered.is_in(list(_TRUE))).then(True).when(lowered.is_in(list(_FALSE))).then(False).otherwise(None)
        )
    if source_type == pl.String and target.is_numeric():
        return expr.str.strip_chars().cast(target, strict=False)
    if source_type == pl.Null:
        return expr.cast(target)
    return expr.cast(target, strict=False)


def _from_epoch(seconds: pl.Expr) -> pl.Expr:
    """Epoch seconds, as Slurm and Prometheus give them; NULL (so: cannot be read) for NaN, inf and
    values beyond year 9999, which would overflow the conversion and fail the whole frame."""
    readable = seconds.is_finite() & (seconds.abs() <= MAX_EPOCH_S)
    micros = pl.when(readable).then(seconds * 1_000_000).otherwise(None).round().cast(pl.Int64)
    return pl.from_epoch(micros, time_unit="us").dt.replace_time_zone("UTC")


def _describe(field: str, reason: str, raw: object) -> str:
    if reason == "is required":
        return f"{field} is required"
    shown = repr(raw)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{field} {reason} (got {shown})"


# Each value as quarantine keeps it: escaped by repr (control characters, NUL), cut to a readable size
# (a 10 MB id is evidence enough in its first few hundred characters).
_RAW_VALUE_CHARS = 500


def _raw_text(values: dict[str, object]) -> str:
    parts = []
    for k, v in values.items():
        if v is None:
            continue
        shown = repr(v)
        if len(shown) > _RAW_VALUE_CHARS:
            shown = f"{shown[:_RAW_VALUE_CHARS]}... ({len(shown):,} characters)"
        parts.append(f"{k}={shown}")
    return ", ".join(parts)
