"""The Parquet lake: the warehouse's raw and derived tables as Hive-partitioned Parquet.

Layout: `<folder>/<table>/cluster=<c>/date=<YYYY-MM-DD>/data.parquet`, the
date being the UTC day of the table's time column (tables without one stop
at `cluster=`, tables without a cluster have one `data.parquet`). Partition
columns live in the path only, as Hive readers expect.

Incremental: `_lake.json` remembers a content fingerprint of every exported
partition; an export rewrites only partitions whose fingerprint changed and
removes those that emptied, so a changed row replaces its partition file and
never adds a duplicate. Atomic: each file is written under a temporary name in
its own directory and renamed over the old one, so a reader sees the old
partition or the new one, never half of it.

`lake_connection` opens DuckDB over the lake with one view per table, so the
SQL of sql/views runs unchanged on either storage.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from pathlib import Path

import duckdb

from preemptlens.analytics.views import registry
from preemptlens.config import Config, section, setting
from preemptlens.errors import ConfigError, SchemaError
from preemptlens.private import (
    make_private,
    open_lock,
    private_folder,
    private_umask,
    refuse_if_others_can_change,
    remove_own_temps,
    replace_privately,
    temp_path,
)
from preemptlens.warehouse import Warehouse, define_functions, quote

log = logging.getLogger(__name__)


@section("lake", "The Parquet lake (`preemptlens export parquet`): raw and derived tables as Hive-partitioned Parquet.")
@dataclass(frozen=True)
class LakeSettings:
    folder: str = setting("", "Folder of the lake; empty: `preemptlens export parquet` needs a folder argument.")
    keep_current: bool = setting(False, "Re-export the partitions that changed after each collection (needs `folder`).")


SETTINGS = LakeSettings

MANIFEST = "_lake.json"
_LOCK = ".lake.lock"
PARTITION_FILE = "data.parquet"
# What versions before private.temp_path named their temporary files; an interrupted export left them.
_OLD_TEMP = re.compile(rf"^({re.escape(PARTITION_FILE)}|{re.escape(MANIFEST)})\.[0-9a-f]{{32}}\.tmp$")
# A table's name in the manifest: a folder of the lake, never a path out of it.
_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
# Partition time column of each raw table (job_runs: start, or submit while pending).
RAW_TIME: dict[str, str | None] = {
    "pools": "valid_from",
    "jobs": "submit_time",
    "job_runs": "coalesce(start_time, submit_time)",
    "job_aliases": None,
    "preemption_links": "time",
    "checkpoints": "time",
    "gpu_samples": "time",
    "scheduler_policy": "valid_from",
    "scheduler_quotas": "observed_at",
}
# What the views read besides the raw tables; the lake must hold them for the SQL to run on it.
ANALYTICS_INPUTS: dict[str, str | None] = {
    "analytics_params": None,
    "analytics_sample_steps": None,
    "analytics_tier_weights": None,
    "gpu_idle_stretches": "start_time",
    "live_costs": "computed_at",  # preemption_live_costs reads the live-cost history
    "counterfactual_hours": "hour",  # readiness_days reads the plain queue's allocation
}
# A derived table is partitioned by the first of these it has.
DERIVED_TIME = ("time", "window_start", "week", "day", "start_time", "submit_time")
_TIMESTAMPTZ = "TIMESTAMP WITH TIME ZONE"
# Hive's spelling of a NULL partition value; DuckDB reads it back as NULL.
_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class TablePlan:
    name: str
    columns: list[tuple[str, str]]
    by_cluster: bool
    time_expr: str | None  # SQL for the partition's day source, None: no date partition

    @property
    def partition_by(self) -> list[str]:
        return (["cluster"] if self.by_cluster else []) + (["date"] if self.time_expr else [])


@dataclass
class TableExport:
    written: int = 0
    removed: int = 0
    unchanged: int = 0
    rows: int = 0


def _total(count: str) -> property:
    """One of TableExport's counts, summed over an export's tables."""
    return property(lambda report: sum(getattr(t, count) for t in report.tables.values()))


@dataclass
class ExportReport:
    folder: Path
    tables: dict[str, TableExport] = field(default_factory=dict)
    seconds: float = 0.0

    written = _total("written")
    removed = _total("removed")
    unchanged = _total("unchanged")
    rows = _total("rows")


def _existing_tables(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(
        con.execute(
            "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
    )


def plans(wh: Warehouse) -> list[TablePlan]:
    """What to export: raw tables, the analytics inputs, and every derived table `analyze` stored."""
    existing = _existing_tables(wh.con)
    wanted: dict[str, str | None] = {**RAW_TIME, **ANALYTICS_INPUTS}
    for view in registry():
        # Before the first `analyze` a figure is at most a view: nothing stored to export.
        if existing.get(view.name) == "BASE TABLE":
            wanted[view.name] = None
    found = []
    for name, time_expr in wanted.items():
        if name not in existing:
            continue
        columns = [(str(r[0]), str(r[1])) for r in wh.con.execute(f"DESCRIBE {quote(name)}").fetchall()]
        types = dict(columns)
        if name not in RAW_TIME and name not in ANALYTICS_INPUTS:
            time_expr = next((quote(c) for c in DERIVED_TIME if types.get(c) == _TIMESTAMPTZ), None)
        if "date" in types:
            # The table's own `date` would clash with the partition column of that name.
            time_expr = None
        found.append(TablePlan(name, columns, "cluster" in types, time_expr))
    return found


def _day_expr(plan: TablePlan) -> str:
    return f"CAST(timezone('UTC', {plan.time_expr}) AS DATE)"


def partition_relpath(plan: TablePlan, cluster: str | None, day: date | None) -> str:
    parts = []
    if plan.by_cluster:
        parts.append("cluster=" + (_NULL_PARTITION if cluster is None else urllib.parse.quote(cluster, safe="")))
    if plan.time_expr:
        parts.append("date=" + (_NULL_PARTITION if day is None else day.isoformat()))
    return "/".join([*parts, PARTITION_FILE])


def partition_of(directory: Path) -> tuple[str | None, date | None]:
    """The cluster and day a Hive-style partition directory (`cluster=.../date=...`, relative to its table)
    stands for: the inverse of partition_relpath, for files another writer (Spark) laid out."""
    values = dict(part.split("=", 1) for part in directory.parts)
    cluster, day = values.get("cluster"), values.get("date")
    return (
        None if cluster in (None, _NULL_PARTITION) else urllib.parse.unquote(cluster),
        None if day in (None, _NULL_PARTITION) else date.fromisoformat(day),
    )


def _fingerprints(wh: Warehouse, plan: TablePlan) -> dict[str, tuple[str, object, object, int]]:
    """relpath -> (fingerprint, cluster, day, rows) of every partition the table has now."""
    keys = (["cluster"] if plan.by_cluster else ["NULL"]) + ([_day_expr(plan)] if plan.time_expr else ["NULL"])
    # Count, xor and sum of row hashes: any changed, added or removed row changes the triple.
    rows = wh.con.execute(
        f"SELECT {keys[0]} AS c, {keys[1]} AS d, count(*), bit_xor(hash(t)), CAST(sum(hash(t)) AS VARCHAR) "  # noqa: S608 -- identifiers quoted
        f"FROM {quote(plan.name)} t GROUP BY ALL"
    ).fetchall()
    signature = hashlib.sha256(json.dumps(plan.columns).encode()).hexdigest()[:16]
    return {partition_relpath(plan, c, d): (f"{n}:{x}:{s}:{signature}", c, d, int(n)) for c, d, n, x, s in rows}


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _write_partition(wh: Warehouse, plan: TablePlan, target: Path, cluster: object, day: object) -> None:
    conditions, params = [], {}
    if plan.by_cluster:
        conditions.append("cluster IS NULL" if cluster is None else "cluster = $cluster")
        if cluster is not None:
            params["cluster"] = cluster
    if plan.time_expr:
        if day is None:
            conditions.append(f"{plan.time_expr} IS NULL")
        else:
            # A range on the column itself (not its date) lets DuckDB skip row groups by min/max.
            assert isinstance(day, date)
            start = datetime.combine(day, clock(), tzinfo=UTC)
            conditions.append(f"{plan.time_expr} >= $start AND {plan.time_expr} < $end")
            params.update(start=start, end=start + timedelta(days=1))
    columns = ", ".join(quote(c) for c, _ in plan.columns if not (c == "cluster" and plan.by_cluster))
    where = " AND ".join(conditions) or "true"
    private_folder(target.parent)
    temp = temp_path(target)
    try:
        wh.con.execute(
            f"COPY (SELECT {columns} FROM {quote(plan.name)} WHERE {where}) "  # noqa: S608 -- identifiers quoted
            f"TO {_literal(str(temp))} (FORMAT parquet)",
            params or None,
        )
        make_private(temp)
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def is_partition(plan: TablePlan, relpath: object) -> bool:
    """Whether `relpath` (read from the manifest) is a path partition_relpath makes for `plan`: nothing else in
    the lake is ever removed, whatever the manifest says (`../../..` included)."""
    if not isinstance(relpath, str):
        return False
    try:
        return partition_relpath(plan, *partition_of(Path(relpath).parent)) == relpath
    except ValueError:
        return False


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _remove_partition(table_dir: Path, relpath: str) -> None:
    """Remove one partition's file (`relpath`, checked by is_partition) and the folders it leaves empty. Each
    folder is opened without following a symlink and the names are removed relative to it, so a symlink in
    the way ends the removal instead of leading it elsewhere."""
    *folders, name = relpath.split("/")
    opened: list[int] = []
    try:
        try:
            opened.append(os.open(table_dir, _FOLDER))
            for folder in folders:
                opened.append(os.open(folder, _FOLDER, dir_fd=opened[-1]))
        except FileNotFoundError:
            return
        except OSError:  # ENOTDIR or ELOOP: a symlink, or a file, where a folder should be
            log.warning("lake: partition %s of %s not removed: a symlink or a file where a folder should be",
                        relpath, table_dir)
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=opened[-1])
        for depth in range(len(folders) - 1, -1, -1):
            try:
                os.rmdir(folders[depth], dir_fd=opened[depth])
            except OSError:  # not empty: another partition lives there
                break
    finally:
        for fd in opened:
            os.close(fd)


def read_manifest(folder: Path) -> dict[str, dict[str, object]]:
    path = folder / MANIFEST
    if not path.exists():
        return {}
    try:
        tables = json.loads(path.read_text())["tables"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SchemaError(f"{path}: not a lake manifest ({exc})", "remove the folder and export again") from exc
    if not isinstance(tables, dict) or not all(isinstance(e, dict) for e in tables.values()):
        raise SchemaError(f"{path}: not a lake manifest (tables is not a table of tables)",
                          "remove the folder and export again")
    for name in tables:
        if not _TABLE_NAME.match(name):
            raise SchemaError(f"{path}: table {name!r} is not a table's name (a lake folder is named after it)",
                              "remove the folder and export again")
    return tables


def write_manifest(folder: Path, tables: dict[str, dict[str, object]]) -> None:
    text = json.dumps({"version": 1, "tables": tables}, indent=1, sort_keys=True)
    replace_privately(folder / MANIFEST, text.encode())


def refuse_shared_lake(root: Path) -> None:
    """Exports and Spark remove and replace files in the lake on the manifest's word: a lake another user can
    change (or a folder above it) is not the service's."""
    refuse_if_others_can_change(root, "the lake", "chmod 700 it, owned by the service's user, or use another")


@contextmanager
def exclusive(folder: Path) -> Iterator[None]:
    """One exporter per lake: two would race on the manifest. The lock is this user's own regular file (a FIFO
    or another user's file in its place is refused, never waited on); under it, the temporary files of an
    interrupted export are removed."""
    fd = open_lock(folder / _LOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        remove_own_temps(folder, recursive=True)
        for base, _, files in os.walk(folder, followlinks=False):
            for name in filter(_OLD_TEMP.match, files):
                (Path(base) / name).unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)  # and with it the lock


def export_changed(wh: Warehouse, folder: str | Path) -> ExportReport:
    """Bring the lake at `folder` up to date with the warehouse, rewriting only changed partitions."""
    started = time.perf_counter()
    private_umask()
    root = private_folder(folder)
    refuse_shared_lake(root)
    report = ExportReport(root)
    with exclusive(root):
        manifest = read_manifest(root)
        # One transaction: every table is exported from the same committed state.
        with wh.transaction():
            for plan in plans(wh):
                table = report.tables.setdefault(plan.name, TableExport())
                table_dir = root / plan.name
                before = manifest.get(plan.name, {}).get("partitions", {})
                assert isinstance(before, dict)
                now = _fingerprints(wh, plan)
                for relpath, (fingerprint, cluster, day, rows) in sorted(now.items()):
                    if before.get(relpath) == fingerprint and (table_dir / relpath).exists():
                        table.unchanged += 1
                        continue
                    _write_partition(wh, plan, table_dir / relpath, cluster, day)
                    table.written += 1
                    table.rows += rows
                for relpath in sorted(set(before) - set(now)):
                    if not is_partition(plan, relpath):
                        log.warning("lake %s: %s: partition %r of %s is not a partition's path; left alone",
                                    root, MANIFEST, relpath, plan.name)
                        continue
                    _remove_partition(table_dir, relpath)
                    table.removed += 1
                manifest[plan.name] = {
                    "columns": plan.columns,
                    "partition_by": plan.partition_by,
                    "partitions": {relpath: entry[0] for relpath, entry in now.items()},
                }
                # After each table: a crash later costs that table's rewrite, not everything.
                write_manifest(root, manifest)
    report.seconds = time.perf_counter() - started
    return report


def lake_folder(given: str | None, config: Config, *, command: str, argument: str, how: str) -> str:
    """The lake a command works on: the folder it was given, else `lake.folder`.

    One definition so that `export parquet` and `spark` find the lake the same way and say the same
    when neither names one; `argument` is what the command calls its folder, `how` shows how to pass it.
    """
    folder = given or config.of(LakeSettings).folder
    if not folder:
        raise ConfigError(
            f"{command}: no {argument} given and lake.folder is not set", f"pass {how} or set [lake] folder"
        )
    return folder


def keep_current(wh: Warehouse, config: Config) -> ExportReport | None:
    """After a write: bring the lake up to date when `lake.keep_current` asks for it."""
    settings = config.of(LakeSettings)
    if not settings.keep_current:
        return None
    folder = settings.folder
    if not folder:
        raise ConfigError("lake.keep_current is true but lake.folder is empty", "set lake.folder to the lake's path")
    return export_changed(wh, folder)


def create_lake_views(con: duckdb.DuckDBPyConnection, folder: str | Path) -> list[str]:
    """Create one view per exported table over its Parquet files, with the warehouse's columns and types,
    and the dialect functions the shared SQL calls."""
    root = Path(folder)
    tables = read_manifest(root)
    if not tables:
        raise SchemaError(f"{root} holds no lake ({MANIFEST} missing)", "run `preemptlens export parquet` first")
    # The shared SQL runs on these views as on the warehouse's tables.
    define_functions(con)
    for name, entry in tables.items():
        columns = entry["columns"]
        partition_by = entry["partition_by"]
        assert isinstance(columns, list) and isinstance(partition_by, list)
        if entry["partitions"]:
            select = ", ".join(f"CAST({quote(c)} AS {t}) AS {quote(c)}" for c, t in columns)
            hive_types = ", ".join(f"{_literal(k)}: {'VARCHAR' if k == 'cluster' else 'DATE'}" for k in partition_by)
            options = f", hive_types = {{{hive_types}}}" if hive_types else ""
            glob = _literal(str(root / name / "**" / "*.parquet"))
            source = f"read_parquet({glob}, hive_partitioning = true{options})"
        else:
            # No rows, no files: an empty relation of the right shape.
            select = ", ".join(f"CAST(NULL AS {t}) AS {quote(c)}" for c, t in columns)
            source = "(SELECT 1) WHERE false"
        con.execute(f"CREATE OR REPLACE VIEW {quote(name)} AS SELECT {select} FROM {source}")  # noqa: S608 -- identifiers quoted
    return sorted(tables)


def lake_connection(folder: str | Path) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB whose tables are the lake's: the warehouse's SQL runs on it unchanged."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    create_lake_views(con, folder)
    return con
