"""`preemptlens demo`: the whole chain on the bundled demo cluster, no server, no config.

Simulate, analyze, suggest, write the weekly report, then open the dashboard
(on a terminal; elsewhere, or with --no-dashboard, it prints how to open it).
The answer comes first: does preemption pay on the demo cluster (the
counterfactual headline and the verdict, after suggest has ranked the fixes),
then the suggestions, the report and how the cluster was simulated.
The demo cluster ends at the start of the current ISO week, so the weekly
report has full weeks to show, and running the demo again in the same week
changes nothing (the simulation is deterministic under its seed).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
import time
from datetime import UTC, datetime, timedelta

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import DEMO, PoolSpec, SimConfig, simulate_into
from preemptlens.analytics.whatif.scorecard import render
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.cli import command_args
from preemptlens.commands import dashboard, report, suggest
from preemptlens.config import Config, WarehouseSettings, number_argument
from preemptlens.warehouse import Warehouse


def demo_config(days: int, gpus: int, seed: int, now: datetime | None = None) -> SimConfig:
    today = (now or datetime.now(UTC)).date()
    week_start = today - timedelta(days=today.weekday())
    start = datetime(week_start.year, week_start.month, week_start.day, tzinfo=UTC) - timedelta(days=days)
    return dataclasses.replace(
        DEMO,
        start=start,
        days=float(days),
        pools=(PoolSpec("a100", nodes=max(1, gpus // 8)),),
        workload=dataclasses.replace(DEMO.workload, seed=seed),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=number_argument(int, 1, 3660), default=21,
                        help="days of history to simulate (default 21)")
    parser.add_argument("--gpus", type=number_argument(int, 8, 1_000_000), default=256,
                        help="GPUs in the demo cluster (default 256)")
    parser.add_argument("--seed", type=number_argument(int, 0, 2**32 - 1), default=DEMO.workload.seed,
                        help="workload seed")
    parser.add_argument("--no-dashboard", action="store_true", help="do not start the dashboard at the end")


def run(args: argparse.Namespace, config: Config) -> int:
    path = config.of(WarehouseSettings).path
    sim = demo_config(args.days, args.gpus, args.seed)
    began = time.perf_counter()

    def say(message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    say(f"simulating the demo cluster into {path}")
    with Warehouse(path) as wh:
        summary = simulate_into(wh, sim, progress=say)
        say("analyzing")
        analyzed = analyze(wh, config.of(AnalyticsSettings), tuning=config.of(TuningSettings))
    say("replaying suggestions")
    suggested = io.StringIO()
    with contextlib.redirect_stdout(suggested):
        suggest.run(command_args(suggest, ["--cluster", sim.cluster], prog="preemptlens suggest"), config)
    with Warehouse(path) as wh:
        print("== does preemption pay?", flush=True)
        print(render(wh))
    print("== suggest", flush=True)
    print(suggested.getvalue(), end="")
    print("== weekly report", flush=True)
    report.run(command_args(report, prog="preemptlens report"), config)
    print("== the demo cluster", flush=True)
    for line in summary.lines():
        print(line)
    print(f"{len(analyzed.views)} views refreshed, {analyzed.stretches.stretches} idle stretches")
    print(f"== done in {time.perf_counter() - began:.0f} s", flush=True)
    dashboard_args = command_args(dashboard, prog="preemptlens dashboard")
    if args.no_dashboard or not sys.stdout.isatty():
        print(f"open the dashboard with: preemptlens --warehouse {path} dashboard")
        return 0
    return dashboard.run(dashboard_args, config)
