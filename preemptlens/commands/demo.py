"""`preemptlens demo`: the whole chain on the bundled demo cluster, no server, no config.

The demo cluster ends at the start of the current ISO week, so the weekly
report has full weeks to show, and running the demo again in the same week
changes nothing (the simulation is deterministic under its seed).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from datetime import UTC, datetime, timedelta

from analytics.params import params_from
from analytics.refresh import analyze
from analytics.scorecard import render
from analytics.simulator import DEMO, PoolSpec, SimConfig, simulate_into
from preemptlens.config import Config
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
    parser.add_argument("--days", type=int, default=21, help="days of history to simulate (default 21)")
    parser.add_argument("--gpus", type=int, default=256, help="GPUs in the demo cluster (default 256)")
    parser.add_argument("--seed", type=int, default=DEMO.workload.seed, help="workload seed")


def run(args: argparse.Namespace, config: Config) -> int:
    path = config.get("warehouse.path")
    sim = demo_config(args.days, args.gpus, args.seed)
    began = time.perf_counter()

    def say(message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    print(f"simulating the demo cluster into {path} ...", flush=True)
    with Warehouse(path) as wh:
        summary = simulate_into(wh, sim, progress=say)
        for line in summary.lines():
            print(line)
        report = analyze(wh, params_from(config))
        print(f"analytics refreshed: {len(report.views)} views, {report.stretches.stretches} idle stretches")
        print(render(wh))
    print(f"done in {time.perf_counter() - began:.1f} s; explore with: preemptlens --warehouse {path} analyze")
    return 0
