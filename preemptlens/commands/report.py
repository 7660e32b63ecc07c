"""`preemptlens report`: the weekly report as self-contained HTML and a Markdown summary.

`preemptlens report --week 2026-W48` writes preemptlens-2026-W48.html and .md
into report.folder (or --out); without --week it reports the last complete
ISO week, which is what `preemptlens serve` runs every Monday. It reads the
published snapshot of the warehouse, so it never blocks a collector.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preemptlens.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--week", help="ISO week to report, e.g. 2026-W48 (default: the last complete week)")
    parser.add_argument("--out", help="folder to write into (default: report.folder)")
    parser.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")


def run(args: argparse.Namespace, config: Config) -> int:
    from preemptlens.analytics.pilot import PilotSettings, declared
    from preemptlens.config import WarehouseSettings
    from preemptlens.dashboards import report
    from preemptlens.dashboards.data import EVERYTHING, DashboardSettings, reader
    from preemptlens.readonly import Limits

    week = report.Week.parse(args.week) if args.week else report.Week.last_complete(datetime.now(UTC))
    settings = config.of(report.ReportSettings)
    folder = Path(args.out or settings.folder)
    with reader(config.of(WarehouseSettings).path, config.of(Limits), scope=EVERYTHING) as r:
        weekly = report.build(
            r, week, top_n=settings.top_n, trend_weeks=settings.trend_weeks,
            clusters=tuple(args.cluster), scheduler=settings.scheduler,
            pilots=tuple(declared(config).values()), thresholds=config.of(PilotSettings),
            price=config.of(DashboardSettings).gpu_hour_price, currency=config.of(DashboardSettings).currency,
        )
    html, markdown = report.write(weekly, folder)
    found = (f"{weekly.headline['preemptions']} preemptions" if weekly.runs_in_week
             else "no data in the warehouse for this week")
    print(f"weekly report {week.label}: {found}; wrote {html} and {markdown}")
    return 0
