"""`preemptlens report`: the weekly report as self-contained HTML and a Markdown summary.

`preemptlens report --week 2026-W48` writes preemptlens-2026-W48.html and .md
into report.folder (or --out); without --week it reports the last complete
ISO week, or, when the data end before that week (a simulation, an import,
a recorded sacct file), the last week with data, and says so; `--week last`
is the last complete week whatever the data, which `preemptlens serve` runs
every Monday. It reads the published snapshot of the
warehouse, so it never blocks a collector.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preemptlens.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--week", help="ISO week to report, e.g. 2026-W48, or `last` for the last complete week "
                        "(default: the last complete week, or the last week with data when the data end before it)")
    parser.add_argument("--out", help="folder to write into (default: report.folder)")
    parser.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")


def run(args: argparse.Namespace, config: Config) -> int:
    from preemptlens.analytics.pilot import PilotSettings, declared, on_cluster
    from preemptlens.config import WarehouseSettings
    from preemptlens.dashboards import report
    from preemptlens.dashboards.data import DashboardSettings, options, reader
    from preemptlens.reading.masking import EVERYTHING
    from preemptlens.readonly import Limits

    settings = config.of(report.ReportSettings)
    folder = Path(args.out or settings.folder)
    with reader(config.of(WarehouseSettings).path, config.of(Limits), scope=EVERYTHING) as r:
        found = options(r)
        if args.week and args.week != "last":
            week = report.Week.parse(args.week)
        else:
            week = report.Week.last_complete(datetime.now(UTC))
            if not args.week and found.last is not None and found.last <= week.start:
                # The data's last moment belongs to the week it ends in (a run ending Monday 00:00 to the one before).
                week = report.Week.of(found.last - timedelta(microseconds=1))
                print(f"the data end at {found.last:%Y-%m-%d %H:%M} UTC, before the last complete week: reporting "
                      f"{week.label}, the last week with data")
        # A declared pilot naming no cluster is of the only one, where the warehouse holds one.
        pilots = tuple(on_cluster(p, found.clusters) if not p.cluster and len(found.clusters) == 1 else p
                       for p in declared(config).values())
        weekly = report.build(
            r, week, top_n=settings.top_n, trend_weeks=settings.trend_weeks,
            clusters=tuple(args.cluster), scheduler=settings.scheduler,
            pilots=pilots, thresholds=config.of(PilotSettings),
            price=config.of(DashboardSettings).gpu_hour_price, currency=config.of(DashboardSettings).currency,
        )
    html, markdown = report.write(weekly, folder)
    what = (f"{weekly.headline['preemptions']} preemptions" if weekly.runs_in_week
            else "no data in the warehouse for this week")
    print(f"weekly report {week.label}: {what}; wrote {html} and {markdown}")
    return 0
