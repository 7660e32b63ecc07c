"""The two heavy scans (idle hoarding, the preemption ledger) on DuckDB and on Spark over one Parquet lake.

    python benchmarks/bench_spark.py [--gpus 4096] [--days 30] [--lake DIR] [--driver-memory 3g]

Builds a lake from the synthetic cluster of bench_analyze.py (GPUS GPUs in
8-GPU nodes, DAYS days of 1-minute samples; raw tables and analytics_params
only), unless --lake names one `preemptlens export parquet` already wrote.
Then times, side by side, the same scans (analytics.spark.SCANS):
  - DuckDB over the lake (each result stored as an in-memory temp table),
  - Spark local[1] and local[2] (each result staged as Parquet in the lake
    layout and read back; the last run swaps its results into the lake),
and checks that both engines gave the same number of rows per table.
Spark's session start-up is printed apart from the scans.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analyze import generate  # a sibling script, not a package

from analytics.lake import export_changed
from analytics.params import SETTINGS, params_from
from analytics.refresh import write_params
from analytics.spark import SCANS, run_duckdb, run_spark, spark_session
from preemptlens.config import Config
from preemptlens.warehouse import Warehouse


def build_lake(folder: Path, gpus: int, days: int) -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, Warehouse(Path(tmp) / "bench.duckdb") as wh:
        generate(wh, gpus, days)
        write_params(wh, PARAMS, 60.0)
        report = export_changed(wh, folder)
    print(f"lake: {report.rows:,} rows in {report.written} partitions, built in {time.perf_counter() - started:.1f} s")


PARAMS = params_from(Config(values={"analytics": {s.key: s.default for s in SETTINGS.settings}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--lake", type=Path, help="reuse this lake instead of building one")
    parser.add_argument("--driver-memory", default="3g", help="Spark driver memory (local mode: all of Spark)")
    parser.add_argument("--duckdb-memory", default="3GB", help="DuckDB memory_limit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lake = args.lake or Path(tmp) / "lake"
        if not args.lake:
            build_lake(lake, args.gpus, args.days)

        started = time.perf_counter()
        con, duck = run_duckdb(lake, memory_limit=args.duckdb_memory)
        duck["total"] = time.perf_counter() - started
        duck_rows = {s.name: con.execute(f"SELECT count(*) FROM temp.{s.name}").fetchone()[0] for s in SCANS}  # type: ignore[index]
        con.close()

        spark_times: dict[str, dict[str, float]] = {}
        spark_rows: dict[str, int] = {}
        for cores in (1, 2):
            master = f"local[{cores}]"
            settings = {"master": master, "driver_memory": args.driver_memory, "shuffle_partitions": 4 * cores}
            config = Config(values={"spark": settings})
            started = time.perf_counter()
            with spark_session(config) as spark:
                startup = time.perf_counter() - started
                started = time.perf_counter()
                report = run_spark(spark, lake, PARAMS)
                report.seconds["total"] = time.perf_counter() - started
            report.seconds["startup"] = startup
            spark_times[master] = report.seconds
            spark_rows = report.rows

    print(f"\n{'scan':<10} {'DuckDB':>10} {'Spark local[1]':>15} {'Spark local[2]':>15} {'speed-up 1->2':>14}")
    for key in ("hoarding", "ledger", "publish", "total", "startup"):
        one, two = spark_times["local[1]"].get(key, 0.0), spark_times["local[2]"].get(key, 0.0)
        duck_s = f"{duck[key]:>9.1f}s" if key in duck else f"{'-':>10}"
        speed = f"{one / two:>13.2f}x" if two else f"{'-':>14}"
        print(f"{key:<10} {duck_s} {one:>14.1f}s {two:>14.1f}s {speed}")
    mismatched = {n: (duck_rows[n], spark_rows.get(n)) for n in duck_rows if duck_rows[n] != spark_rows.get(n)}
    print(f"\nrows per table (DuckDB = Spark): {duck_rows}" if not mismatched else f"\nROW COUNTS DIFFER: {mismatched}")


if __name__ == "__main__":
    main()
