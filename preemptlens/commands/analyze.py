"""`preemptlens analyze`: refresh the analytics (idle stretches, views) and print the scorecard.

Incremental by default: only the gpu_samples that loads since the last run
wrote are rescanned, and only the views whose inputs changed are recomputed
(none when nothing changed); `--full` rebuilds everything.
"""

from __future__ import annotations

import argparse

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.scorecard import render
from preemptlens.config import Config, WarehouseSettings
from preemptlens.warehouse import Warehouse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--full", action="store_true", help="rebuild every derived table from the raw tables")
    parser.add_argument("--quiet", action="store_true", help="do not print the readiness scorecard")


def run(args: argparse.Namespace, config: Config) -> int:
    params = config.of(AnalyticsSettings)
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        report = analyze(wh, params, full=args.full)
        timings = ", ".join(f"{k} {v:.2f} s" for k, v in report.seconds.items())
        if report.unchanged_since is not None:
            print(f"nothing changed since the analyze of {report.unchanged_since:%Y-%m-%d %H:%M:%S} UTC (no load, "
                  f"no setting, no live cost): its {len(report.kept)} views are current; --full recomputes them")
        else:
            kept = f", {len(report.kept)} unchanged" if report.kept else ""
            built = f"{len(report.views)} view{'' if len(report.views) == 1 else 's'} refreshed"
            print(
                f"idle stretches: {report.stretches.mode} refresh, {report.stretches.stretches} stretches "
                f"(sampling step {report.sample_step_s:g} s); {built}{kept}; {timings}"
            )
        if not args.quiet:
            print(render(wh))
    return 0
