"""Throughput of the Parquet lake export (analytics.lake.export_changed), rows/s.

    python benchmarks/bench_export.py [--gpus 256] [--days 3]

Simulates a cluster into a fresh warehouse and runs `analyze`, then exports
it three times: everything (first export), nothing changed (the fingerprint
scan alone), and after one job changed (one partition rewritten). Then the
lake's size per table: bytes per row and per GPU-day, the figures the sizing
section of docs/lake.md scales up.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import polars as pl

from preemptlens.analytics.lake import ExportReport, export_changed
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import SimConfig, cluster_of, simulate_into
from preemptlens.config import load_config
from preemptlens.warehouse import Warehouse


def show(label: str, report: ExportReport) -> None:
    rate = report.rows / report.seconds if report.seconds else 0.0
    print(
        f"{label:<22} {report.written:>5} written {report.unchanged:>5} unchanged {report.rows:>12,} rows "
        f"{report.seconds:8.2f} s {rate:>12,.0f} rows/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Warehouse(Path(tmp) / "export.duckdb") as wh:
        simulate_into(wh, SimConfig(cluster="bench", days=args.days, pools=cluster_of(args.gpus)))
        analyze(wh, load_config(overrides={"warehouse.path": wh.path}).of(AnalyticsSettings))
        lake = Path(tmp) / "lake"
        show("first export", export_changed(wh, lake))
        show("nothing changed", export_changed(wh, lake))
        job = wh.query("SELECT * EXCLUDE (source, _load_id) FROM jobs ORDER BY submit_time DESC LIMIT 1")
        wh.load("jobs", job.with_columns(pl.lit("renamed").alias("name")), "bench")
        show("one job changed", export_changed(wh, lake))
        sizes(lake, args.gpus * args.days)


def sizes(lake: Path, gpu_days: float) -> None:
    print(f"{'table':<24} {'rows':>12} {'bytes':>14} {'bytes/row':>10} {'bytes/GPU-day':>14}")
    for table in sorted(p for p in lake.iterdir() if p.is_dir()):
        files = list(table.rglob("*.parquet"))
        if not files:
            continue
        rows = pl.scan_parquet(files, hive_partitioning=False).select(pl.len()).collect().item()
        size = sum(f.stat().st_size for f in files)
        per_row = size / rows if rows else 0.0
        print(f"{table.name:<24} {rows:>12,} {size:>14,} {per_row:>10.1f} {size / gpu_days:>14,.0f}")


if __name__ == "__main__":
    main()
