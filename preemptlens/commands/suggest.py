"""`preemptlens suggest`: replay the recorded workload, print and store the suggestions.

Reads the views `preemptlens analyze` maintains; run that first. The replay's
error under the actual policy is always printed before any what-if.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from preemptlens.analytics import victim_order
from preemptlens.analytics.replay import Interval, Window, bound, default_window
from preemptlens.analytics.tuning import GENERATORS, Suggestion, TuningSettings, context, store, suggest
from preemptlens.config import ClusterSettings, Config, WarehouseSettings
from preemptlens.errors import ConfigError
from preemptlens.times import TIME_HELP, parse_when
from preemptlens.warehouse import Warehouse


def _time(text: str) -> datetime:
    try:
        return parse_when(text, "time")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _only_cluster(wh: Warehouse) -> str:
    names = wh.query("SELECT DISTINCT cluster FROM jobs ORDER BY cluster")["cluster"].to_list()
    if len(names) != 1:
        raise ConfigError("suggest: which cluster? " + (f"the warehouse holds {', '.join(names)}" if names
                          else "the warehouse holds no jobs"), "give --cluster or set cluster.name")
    return str(names[0])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", help="cluster to tune (default: cluster.name, else the only one in the warehouse)")
    parser.add_argument("--start", type=_time, help=f"window start: {TIME_HELP} (default: the first submission)")
    parser.add_argument("--end", type=_time, help="window end, written as --start (default: the last recorded time)")
    parser.add_argument(
        "--only", action="append", choices=[g.__name__ for g in GENERATORS], help="run only these generators"
    )
    parser.add_argument(
        "--scheduler", help="print only this scheduler's snippets (slurm, kueue, kai, volcano, kubernetes)"
    )
    parser.add_argument("--no-store", action="store_true", help="print only; do not write the suggestions table")


def _print(s: Suggestion, position: int, scheduler: str | None) -> None:
    print(f"{position}. {s.title}")
    if s.current is not None or s.proposed is not None:
        print(f"   {s.setting}: {s.current} -> {s.proposed}")
    print(f"   evidence: {s.evidence}")
    print(f"   effect: {s.effect}")
    for name, text in sorted(s.snippets.items()):
        if scheduler is None or name == scheduler:
            print(f"   --- {name}")
            print("\n".join("   " + line for line in text.rstrip("\n").splitlines()))


def run(args: argparse.Namespace, config: Config) -> int:
    settings = config.of(TuningSettings)
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        cluster = args.cluster or config.of(ClusterSettings).name or _only_cluster(wh)
        window = default_window(wh, cluster)
        window = Window(cluster, args.start or window.start, args.end or window.end)
        if window.end <= window.start:
            raise ConfigError(f"window {window.start.isoformat()} .. {window.end.isoformat()} is empty",
                              "give --end after --start")
        ctx = context(wh, window, settings)
        print(ctx.validation.describe())
        print("   observed: " + json.dumps(vars(ctx.validation.observed), default=str))
        print("   replayed: " + json.dumps(vars(ctx.validation.replayed), default=str))
        draws = ctx.baseline_draws()
        if len(draws) > 1:
            spread = Interval(bound(draws, min), bound(draws, max), len(draws))
            print("   replayed with inputs jittered within their measurement error: " + ", ".join(
                f"{label} {spread.shown(name, unit)}" for label, name, unit in (
                    ("preemptions", "preemptions", ""), ("victims", "victim_jobs", ""),
                    ("lost GPU-hours", "lost_gpu_h", ""), ("high-priority median wait", "high_wait_median_s", " s"))))
        elif draws:
            print("   exact inputs: every replayed figure is a point (no measurement error to jitter)")
        for note in ctx.workload.notes:
            print(f"   {note}")
        if not ctx.validation.ok:
            print("   the what-ifs below come from a replay that does not reproduce the past: read them as rough")
        if config.of(victim_order.VictimOrderSettings).compare:
            for line in victim_order.compare(ctx.workload, ctx.baseline).lines():
                print(line)
        found = suggest(ctx, args.only)
        if not args.no_store:
            store(wh, ctx, found)
        if not found:
            print("no suggestions: the data shows none of the problems the rules look for")
        for position, s in enumerate(found, start=1):
            _print(s, position, args.scheduler)
    return 0
