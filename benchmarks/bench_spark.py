"""The two heavy scans (idle hoarding, the preemption ledger) on DuckDB and on Spark over one Parquet lake.

    python benchmarks/bench_spark.py [--gpus 4096] [--days 30] [--lake DIR] [--driver-memory 3g] [--cores 1,2]

Builds a lake from the synthetic cluster of bench_analyze.py (GPUS GPUs in
8-GPU nodes, DAYS days of 1-minute samples; raw tables and analytics_params
only), unless --lake names one `preemptlens export parquet` already wrote.
Then times, side by side, the same scans (analytics.spark.SCANS):
  - DuckDB over the lake (each result stored as an in-memory temp table),
  - Spark local[N] for each N of --cores (each result staged as Parquet in
    the lake layout and read back; each run swaps its results into the lake),
and checks that both engines gave the same number of rows per table.
Spark's session start-up is printed apart from the scans, and the JVM's CPU
seconds (all threads: JIT, GC, planning, tasks) beside its wall seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analyze import generate  # a sibling script, not a package

from preemptlens.analytics.hoarding import infer_steps
from preemptlens.analytics.lake import MANIFEST, export_changed
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import write_params
from preemptlens.analytics.spark import SCANS, run_duckdb, run_spark, spark_session
from preemptlens.config import Config
from preemptlens.warehouse import Warehouse


def build_lake(folder: Path, gpus: int, days: int) -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, Warehouse(Path(tmp) / "bench.duckdb") as wh:
        generate(wh, gpus, days)
        write_params(wh, PARAMS, infer_steps(wh, PARAMS.sample_step_s))
        report = export_changed(wh, folder)
    print(f"lake: {report.rows:,} rows in {report.written} partitions, built in {time.perf_counter() - started:.1f} s")


PARAMS = AnalyticsSettings()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--lake", type=Path, help="reuse this lake, or build it here to keep it (default: a temp dir)")
    parser.add_argument("--driver-memory", default="3g", help="Spark driver memory (local mode: all of Spark)")
    parser.add_argument("--duckdb-memory", default="3GB", help="DuckDB memory_limit")
    parser.add_argument("--cores", default="1,2", help="the Spark local[N] runs, e.g. `2` alone on a big lake")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lake = args.lake or Path(tmp) / "lake"
        if not (lake / MANIFEST).exists():
            build_lake(lake, args.gpus, args.days)

        print(f"load average before the scans: {_load()}")
        started, cpu = time.perf_counter(), time.process_time()
        con, duck = run_duckdb(lake, memory_limit=args.duckdb_memory)
        duck["total"] = time.perf_counter() - started
        duck["cpu"] = time.process_time() - cpu
        duck_rows = {s.name: con.execute(f"SELECT count(*) FROM temp.{s.name}").fetchone()[0] for s in SCANS}  # type: ignore[index]
        con.close()
        print(f"DuckDB done, load average {_load()}", flush=True)

        spark_times: dict[str, dict[str, float]] = {}
        spark_rows: dict[str, int] = {}
        for cores in (int(c) for c in args.cores.split(",")):
            master = f"local[{cores}]"
            settings = {"master": master, "driver_memory": args.driver_memory, "shuffle_partitions": 4 * cores}
            config = Config(values={"spark": settings})
            started = time.perf_counter()
            with spark_session(config) as spark:
                startup = time.perf_counter() - started
                jvm = _jvm_pid(spark)
                started, cpu = time.perf_counter(), _jvm_cpu(jvm)
                report = run_spark(spark, lake, PARAMS)
                report.seconds["total"] = time.perf_counter() - started
                report.seconds["cpu"] = _jvm_cpu(jvm) - cpu
            report.seconds["startup"] = startup
            spark_times[master] = report.seconds
            spark_rows = report.rows
            print(f"{master} done, load average {_load()}", flush=True)

    masters = list(spark_times)
    print(f"\n{'scan':<10} {'DuckDB':>10}" + "".join(f" {'Spark ' + m:>15}" for m in masters))
    for key in ("hoarding", "ledger", "publish", "total", "cpu", "startup"):
        duck_s = f"{duck[key]:>9.1f}s" if key in duck else f"{'-':>10}"
        print(f"{key:<10} {duck_s}" + "".join(f" {spark_times[m].get(key, 0.0):>14.1f}s" for m in masters))
    if len(masters) > 1:
        first, last = spark_times[masters[0]]["total"], spark_times[masters[-1]]["total"]
        print(f"speed-up {masters[0]} -> {masters[-1]}: {first / last:.2f}x (total)")
    print("(cpu: DuckDB's process CPU over its scans; the JVM's CPU, all threads, over Spark's)")
    mismatched = {n: (duck_rows[n], spark_rows.get(n)) for n in duck_rows if duck_rows[n] != spark_rows.get(n)}
    print(f"\nrows per table (DuckDB = Spark): {duck_rows}" if not mismatched else f"\nROW COUNTS DIFFER: {mismatched}")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def _jvm_cpu(pid: int) -> float:
    """User + system CPU seconds of the JVM, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
