"""`preemptlens export parquet [DIR]`: bring the Parquet lake up to date with the warehouse.

Only partitions whose rows changed since the last export are rewritten; see
analytics/lake.py and docs/lake.md.
"""

from __future__ import annotations

import argparse

from preemptlens.analytics.lake import export_changed, lake_folder
from preemptlens.config import Config, WarehouseSettings
from preemptlens.warehouse import Warehouse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("format", choices=("parquet",), help="output format")
    parser.add_argument("folder", nargs="?", help="folder of the lake (default: lake.folder)")


def run(args: argparse.Namespace, config: Config) -> int:
    how = "a folder (e.g. `preemptlens export parquet ./lake`)"
    folder = lake_folder(args.folder, config, command="export parquet", argument="folder", how=how)
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        report = export_changed(wh, folder)
    rate = report.rows / report.seconds if report.seconds else 0.0
    print(
        f"lake {report.folder}: {report.written} partitions written ({report.rows} rows, {rate:,.0f} rows/s), "
        f"{report.unchanged} unchanged, {report.removed} removed, {len(report.tables)} tables "
        f"in {report.seconds:.2f} s"
    )
    return 0
