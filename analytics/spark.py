"""The two heavy scans (idle hoarding, the preemption ledger) on Apache Spark over the Parquet lake.

Spark reads the raw tables of a lake written by `preemptlens export parquet`,
runs the same SQL files the warehouse runs (sql/scans and sql/views; where
the dialects differ the SQL calls a named function, defined for each engine in
sql/functions/), and writes every
result back into the lake in its layout (`<table>/cluster=…/date=…/data.parquet`),
so `lake_connection` and the rest of preemptlens read Spark's results as
they read the warehouse's. docs/spark.md says what is shared and why.

Atomic: every result is first written under `<lake>/.spark-<run>/`; only when
all of them are complete are the tables swapped in, each by a directory
rename, under the lake's exporter lock. A failed run leaves the lake as it was.

pyspark is an optional extra (`preemptlens[spark]`) and is imported only when
a session is asked for.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from preemptlens.analytics.lake import (
    ANALYTICS_INPUTS,
    DERIVED_TIME,
    MANIFEST,
    PARTITION_FILE,
    TablePlan,
    create_lake_views,
    exclusive,
    partition_of,
    partition_relpath,
    read_manifest,
    refuse_shared_lake,
    write_manifest,
)
from preemptlens.analytics.params import DEFAULT_STEP_S, AnalyticsSettings, param_columns, param_row
from preemptlens.analytics.views import VIEWS_DIR, _body
from preemptlens.analytics.whatif.replay import Figures, Variant, Workload, picklable, pool_replays, pooled_figures
from preemptlens.config import Config, section, setting, size_text
from preemptlens.errors import ConfigError, SchemaError
from preemptlens.warehouse import SQL_DIR, Warehouse, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@section("spark", "Apache Spark for the heavy scans over the Parquet lake (`preemptlens spark`, docs/spark.md).")
@dataclass(frozen=True)
class SparkSettings:
    master: str = setting("local[2]", "Spark master URL: `local[N]` runs in this process on N cores.")
    driver_memory: str = setting(
        "2g",
        "Memory of the Spark driver JVM (in local mode it does all the work), e.g. `2g`.",
        check=size_text(256 * 10**6, 2**40),
    )
    shuffle_partitions: int = setting(
        8,
        "Partitions of each shuffle (spark.sql.shuffle.partitions); a few per core suits local mode.",
        bounds=(1, 10_000),
    )


SETTINGS = SparkSettings

SCANS_DIR = SQL_DIR / "scans"
# The functions the shared SQL calls: those both engines define alike, then Spark's forms of the DuckDB
# built-ins and of the dialect functions of sql/functions/duckdb.sql.
FUNCTIONS = (SQL_DIR / "functions" / "shared.sql", SQL_DIR / "functions" / "spark.sql")
RAW_INPUTS = ("pools", "jobs", "job_runs", "checkpoints", "preemption_links", "gpu_samples")


@dataclass(frozen=True)
class Scan:
    """One result table and its SQL file, the same on both engines (dialect differences are named functions)."""

    name: str
    group: str  # hoarding | ledger: which of the two heavy scans it belongs to
    path: Path

    @property
    def sql(self) -> str:
        return _body(self.path.read_text())


def _view(name: str, group: str) -> Scan:
    return Scan(name, group, VIEWS_DIR / f"{name}.sql")


# In dependency order: each reads only the raw tables, analytics_params and the scans before it.
SCANS: tuple[Scan, ...] = (
    Scan("gpu_idle_stretches", "hoarding", SCANS_DIR / "gpu_idle_stretches.sql"),
    _view("stg_job_runs", "hoarding"),
    _view("stg_runs", "hoarding"),
    _view("hoarding_stretches", "hoarding"),
    _view("idle_hoarding_runs", "hoarding"),
    _view("idle_hoarding", "hoarding"),
    _view("stg_preemptions", "ledger"),
    _view("preemption_gains", "ledger"),
    _view("preemption_ledger", "ledger"),
)


@dataclass
class SparkRun:
    folder: Path
    rows: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # per group, plus "publish"


# ---------------------------------------------------------------- session


def _pyspark() -> Any:
    try:
        with warnings.catch_warnings():
            # pyspark warns about the pandas version at import; preemptlens does not use its pandas bridge.
            warnings.simplefilter("ignore", FutureWarning)
            from pyspark.sql import SparkSession
    except ImportError as exc:
        raise ConfigError(
            f"Apache Spark is not installed ({exc})",
            "install the extra: pip install 'preemptlens[spark]' (it needs Java 17 or later)",
        ) from exc
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise ConfigError("Spark needs Java, and no `java` is on PATH nor JAVA_HOME set", "install Java 17 or later")
    return SparkSession


@contextmanager
def spark_session(config: Config | None = None, *, master: str | None = None) -> Iterator[SparkSession]:
    """A local Spark session set up for the lake; stopped on exit unless it was already running."""
    session_class = _pyspark()
    running = session_class.getActiveSession()
    if running is not None:
        yield running
        return
    settings = (config or Config()).of(SparkSettings)
    builder = (
        session_class.builder.appName("preemptlens")
        .master(master or settings.master)
        .config("spark.driver.memory", settings.driver_memory)
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        # The data contract is UTC: to_date() and timestamp rendering must not follow the host's zone.
        .config("spark.sql.session.timeZone", "UTC")
        # DuckDB returns NULL for x / 0; ANSI mode would raise instead.
        .config("spark.sql.ansi.enabled", "false")
        # Plain 64-bit microseconds, as the lake's other files (Spark's default is the legacy INT96).
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # A cluster named `1` stays the string "1".
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        # Inferring filters from the constraints of every join cost stg_preemptions a quarter of its CPU
        # (its CTEs are inlined into many joins) and filters nothing the SQL does not already say.
        .config("spark.sql.constraintPropagation.enabled", "false")
        # Every lake table is partitioned by cluster and every join of the views is within a cluster, so
        # dynamic partition pruning prunes nothing here; yet it hangs a copy of the join's other side on each
        # scan as a subquery, and those copies nest: stg_preemptions' plan grew to thousands of subqueries
        # and its broadcasts ran the driver out of heap.
        .config("spark.sql.optimizer.dynamicPartitionPruning.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


# ---------------------------------------------------------------- types

_SPARK_TYPES = {
    "VARCHAR": "string",
    "TIMESTAMP WITH TIME ZONE": "timestamp",
    "DOUBLE": "double",
    "FLOAT": "float",
    "BIGINT": "bigint",
    "INTEGER": "int",
    "SMALLINT": "smallint",
    "TINYINT": "tinyint",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "HUGEINT": "decimal(38,0)",
}
_DECIMAL = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")


def spark_type(duckdb_type: str) -> str:
    if duckdb_type in _SPARK_TYPES:
        return _SPARK_TYPES[duckdb_type]
    decimal = _DECIMAL.match(duckdb_type)
    if decimal:
        return f"decimal({decimal[1]},{decimal[2]})"
    raise SchemaError(f"no Spark type for the warehouse type {duckdb_type}", "add it to analytics.spark._SPARK_TYPES")


def warehouse_types(scans: Sequence[Scan] = SCANS) -> dict[str, list[tuple[str, str]]]:
    """The DuckDB columns of analytics_params, analytics_sample_steps and every scan, as the warehouse would store
    them."""
    types = {"analytics_params": param_columns()}
    with Warehouse(":memory:") as wh:
        types["analytics_sample_steps"] = [(str(r[0]), str(r[1])) for r in
                                           wh.con.execute("DESCRIBE analytics_sample_steps").fetchall()]
        for scan in scans:
            sql = scan.sql
            types[scan.name] = [(str(r[0]), str(r[1])) for r in wh.con.execute(f"DESCRIBE {sql}").fetchall()]
            # Later scans read this one: shadow any table of that name with the scan's own SQL.
            wh.con.execute(f"CREATE OR REPLACE TEMP VIEW {quote(scan.name)} AS {sql}")
    return types


def plan_of(name: str, columns: list[tuple[str, str]]) -> TablePlan:
    """How the lake partitions a table of these columns (the rule of analytics.lake.plans)."""
    types = dict(columns)
    if name in ANALYTICS_INPUTS:
        time_expr = ANALYTICS_INPUTS[name]
    else:
        time_expr = next((c for c in DERIVED_TIME if types.get(c) == "TIMESTAMP WITH TIME ZONE"), None)
    if "date" in types:
        time_expr = None
    return TablePlan(name, columns, "cluster" in types, time_expr)


# ---------------------------------------------------------------- reading the lake


def _read_table(spark: SparkSession, root: Path, name: str, columns: list[tuple[str, str]]) -> DataFrame:
    """A table of the lake (or of a staging folder) with the warehouse's columns, order and types."""
    table_dir = root / name
    if not any(table_dir.rglob(f"*{PARTITION_FILE}")):
        return _rows(spark, columns, None)
    frame = (
        spark.read.option("basePath", str(table_dir))
        # An export in progress leaves `data.parquet.<id>.tmp` files beside the real ones.
        .option("pathGlobFilter", "*.parquet")
        .parquet(str(table_dir))
    )
    return frame.selectExpr(*(f"CAST(`{c}` AS {spark_type(t)}) AS `{c}`" for c, t in columns))


def _rows(spark: SparkSession, columns: list[tuple[str, str]], row: dict[str, Any] | None) -> DataFrame:
    """One row of bound values, or none: built in the JVM, since a frame made from Python
    data would start Python workers in every query that reads it."""
    if row is None:
        select = ", ".join(f"CAST(NULL AS {spark_type(t)}) AS `{c}`" for c, t in columns)
        return spark.sql(f"SELECT {select} WHERE false")
    select = ", ".join(f"CAST(:v{i} AS {spark_type(t)}) AS `{c}`" for i, (c, t) in enumerate(columns))
    return spark.sql(f"SELECT {select}", args={f"v{i}": row[c] for i, (c, _) in enumerate(columns)})


def _union(spark: SparkSession, columns: list[tuple[str, str]], rows: list[dict[str, Any]]) -> DataFrame:
    """Several rows of bound values (`_rows`'s, one after the other), or none."""
    frames = [_rows(spark, columns, row) for row in rows] or [_rows(spark, columns, None)]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionAll(frame)
    return union


def register_lake(spark: SparkSession, folder: str | Path) -> dict[str, list[tuple[str, str]]]:
    """Temp views over the lake's raw tables; returns the manifest's columns of each."""
    root = Path(folder)
    manifest = read_manifest(root)
    if not manifest:
        raise SchemaError(f"{root} holds no lake ({MANIFEST} missing)", "run `preemptlens export parquet` first")
    missing = [t for t in RAW_INPUTS if t not in manifest]
    if missing:
        raise SchemaError(
            f"lake {root} lacks the tables {', '.join(missing)}",
            "export a warehouse that has them: `preemptlens export parquet`",
        )
    columns = {}
    for name in RAW_INPUTS:
        entry = manifest[name]["columns"]
        assert isinstance(entry, list)
        columns[name] = [(str(c), str(t)) for c, t in entry]
        _read_table(spark, root, name, columns[name]).createOrReplaceTempView(name)
    register_functions(spark)
    return columns


def register_functions(spark: SparkSession) -> None:
    """The functions the shared SQL calls, in this Spark session."""
    for path in FUNCTIONS:
        for statement in _body(path.read_text()).split(";"):
            if statement.strip():
                spark.sql(statement)


def infer_steps(spark: SparkSession, root: Path, configured: float = 0.0) -> dict[str, float]:
    """Each cluster's collection step, as analytics.hoarding.infer_steps gives it: `configured` when set, else
    the median spacing of one of its GPUs' samples. The clusters are the lake's partitions of gpu_samples."""
    clusters = sorted({c for c, _ in (partition_of(p.parent.relative_to(root / "gpu_samples"))
                                      for p in (root / "gpu_samples").rglob(f"*{PARTITION_FILE}")) if c is not None})
    if configured:
        return dict.fromkeys(clusters, configured)
    steps = {}
    for cluster in clusters:
        one = spark.sql("SELECT host, gpu_uuid, gpu_instance FROM gpu_samples WHERE cluster = :cluster LIMIT 1",
                        args={"cluster": cluster}).first()
        if one is None:
            continue
        # The GPU as bound values, not a join: Spark then prunes to its cluster's partitions and skips
        # row groups by the Parquet statistics instead of scanning and shuffling every sample.
        row = spark.sql(
            "WITH times AS (SELECT time FROM gpu_samples "
            "WHERE cluster = :cluster AND host = :host AND gpu_uuid = :gpu_uuid AND gpu_instance = :gpu_instance), "
            "gaps AS (SELECT epoch(time) - epoch(lag(time) OVER (ORDER BY time)) AS gap FROM times) "
            "SELECT median(gap) FROM gaps WHERE gap > 0",
            args={"cluster": cluster, **one.asDict()},
        ).first()
        steps[cluster] = float(row[0]) if row and row[0] else DEFAULT_STEP_S
    return steps


# ---------------------------------------------------------------- writing the lake


def _stage(frame: DataFrame, plan: TablePlan, staging: Path) -> dict[str, str]:
    """Write one result under `staging/<table>/` in the lake's layout; returns relpath -> fingerprint."""
    from pyspark.sql import functions as f

    spark_dir = staging / f"{plan.name}.spark"
    keys = plan.partition_by
    if plan.time_expr:
        frame = frame.withColumn("date", f.to_date(f.col(plan.time_expr)))
    # One shuffle partition per lake partition, so each directory gets exactly one file.
    writer = (frame.repartition(*keys) if keys else frame.coalesce(1)).write.mode("error")
    if keys:
        writer = writer.partitionBy(*keys)
    writer.parquet(str(spark_dir))
    target = staging / plan.name
    target.mkdir()
    run = staging.name
    partitions: dict[str, str] = {}
    for path in sorted(spark_dir.rglob("*.parquet")):
        relpath = partition_relpath(plan, *partition_of(path.parent.relative_to(spark_dir)))
        if relpath in partitions:
            raise SchemaError(f"Spark wrote two files for partition {relpath} of {plan.name}")
        (target / relpath).parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target / relpath)
        # Not a content hash: the next `export parquet` of a warehouse holding this table rewrites it.
        partitions[relpath] = f"spark:{run}"
    shutil.rmtree(spark_dir)
    return partitions


def _publish(root: Path, staging: Path, entries: dict[str, dict[str, object]]) -> None:
    """Swap each staged table in for the lake's, one directory rename each, under the exporter lock."""
    with exclusive(root):
        manifest = read_manifest(root)
        for name, entry in entries.items():
            live = root / name
            if live.exists():
                os.replace(live, staging / f"{name}.old")
            os.replace(staging / name, live)
            manifest[name] = entry
            write_manifest(root, manifest)


def run_spark(
    spark: SparkSession,
    folder: str | Path,
    params: AnalyticsSettings,
    *,
    scans: Sequence[Scan] = SCANS,
) -> SparkRun:
    """Run the scans on Spark over the lake at `folder` and swap their results into it."""
    root = Path(folder)
    refuse_shared_lake(root)
    report = SparkRun(root)
    register_lake(spark, root)
    types = warehouse_types(scans)
    steps = infer_steps(spark, root, params.sample_step_s)
    # The settings the scans read, written into the lake beside their results (as `analyze` writes them).
    inputs = {
        "analytics_params": _rows(spark, types["analytics_params"], param_row(params, steps)),
        "analytics_sample_steps": _union(spark, types["analytics_sample_steps"],
                                         [{"cluster": c, "sample_step_s": s} for c, s in steps.items()]),
    }
    for name, frame in inputs.items():
        frame.createOrReplaceTempView(name)

    staging = root / f".spark-{uuid.uuid4().hex}"
    staging.mkdir(mode=0o700)
    entries: dict[str, dict[str, object]] = {}
    try:
        for name, scan in [*((n, None) for n in inputs), *((s.name, s) for s in scans)]:
            started = time.perf_counter()
            columns = types[name]
            frame = inputs[name] if scan is None else spark.sql(scan.sql)
            got = [c.lower() for c in frame.columns]
            if got != [c for c, _ in columns]:
                raise SchemaError(f"Spark's {name} has the columns {got}, the warehouse's {[c for c, _ in columns]}")
            frame = frame.selectExpr(*(f"CAST(`{c}` AS {spark_type(t)}) AS `{c}`" for c, t in columns))
            plan = plan_of(name, columns)
            partitions = _stage(frame, plan, staging)
            entries[name] = {"columns": columns, "partition_by": plan.partition_by, "partitions": partitions}
            # Later scans read the stored rows, not the plan again (as apply_views materialises each view).
            _read_table(spark, staging, name, columns).createOrReplaceTempView(name)
            if scan is not None:
                report.rows[name] = spark.table(name).count()
                report.seconds[scan.group] = report.seconds.get(scan.group, 0.0) + time.perf_counter() - started
        started = time.perf_counter()
        _publish(root, staging, entries)
        report.seconds["publish"] = time.perf_counter() - started
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("spark scans over %s: %s", root, report.rows)
    return report


# ---------------------------------------------------------------- the same scans on DuckDB


def run_duckdb(
    folder: str | Path, scans: Sequence[Scan] = SCANS, *, memory_limit: str | None = None
) -> tuple[duckdb.DuckDBPyConnection, dict[str, float]]:
    """The same scans on DuckDB over the lake, each stored as a temp table; the connection and seconds per group."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    if memory_limit:
        con.execute("SET memory_limit = $limit", {"limit": memory_limit})
    create_lake_views(con, folder)
    seconds: dict[str, float] = {}
    for scan in scans:
        started = time.perf_counter()
        # A temp table shadows the lake's view of the same name for the scans after it.
        con.execute(f"CREATE OR REPLACE TEMP TABLE {quote(scan.name)} AS {scan.sql}")
        seconds[scan.group] = seconds.get(scan.group, 0.0) + time.perf_counter() - started
    return con, seconds


# ---------------------------------------------------------------- replays, one task per pool


def replay_per_pool(spark: SparkSession, workload: Workload, variants: Sequence[Variant]) -> list[Figures]:
    """Each variant's replay of `workload` run on Spark as one task per pool (pools share no GPUs:
    `whatif.replay.PoolReplay`), its figures gathered on the driver: the same figures as `run_variant` gives
    on one machine, to the last bit. For a fleet whose window is too big for one machine's replays; the
    executors need preemptlens importable (local mode: this Python)."""
    tasks = [(k, replay) for k, variant in enumerate(variants) for replay in pool_replays(workload, picklable(variant))]
    if not tasks:
        return []
    parts = spark.sparkContext.parallelize(tasks, len(tasks)).map(lambda task: (task[0], task[1].parts())).collect()
    return [pooled_figures(workload, [p for k, p in parts if k == wanted]) for wanted in range(len(variants))]
