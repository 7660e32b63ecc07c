"""`preemptlens spark [--lake DIR]`: the heavy scans (idle hoarding, the ledger) on Apache Spark over the lake.

Reads the raw tables of a lake that `preemptlens export parquet` wrote and
writes the idle stretches, hoarding figures and the preemption ledger back
into it; see analytics/spark.py and docs/spark.md. Needs `preemptlens[spark]`.
"""

from __future__ import annotations

import argparse

from preemptlens.analytics.lake import lake_folder
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.spark import run_spark, spark_session
from preemptlens.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="folder of the lake (default: lake.folder)")
    parser.add_argument("--master", help="Spark master, e.g. local[4] (default: spark.master)")


def run(args: argparse.Namespace, config: Config) -> int:
    how = "--lake DIR (a folder `preemptlens export parquet DIR` wrote)"
    folder = lake_folder(args.lake, config, command="spark", argument="lake", how=how)
    params = config.of(AnalyticsSettings)
    with spark_session(config, master=args.master) as spark:
        report = run_spark(spark, folder, params)
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    tables = ", ".join(f"{name} {rows}" for name, rows in report.rows.items())
    print(f"lake {report.folder}: wrote {tables} (rows); {timings}")
    return 0
