"""`preemptlens suggest`: replay the recorded workload, print and store the suggestions.

Reads the views `preemptlens analyze` maintains; run that first. The replay's
error under the actual policy is always printed before any what-if. Storing the
suggestions also gives the counterfactual headline its best alternative and the
verdict its ranked fixes (one list: the fixes of what failed rank first).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import datetime

from preemptlens.analytics import actions
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.whatif import counterfactual, scorecard, victim_order
from preemptlens.analytics.whatif.replay import Interval, Validation, Window, bound, default_window
from preemptlens.analytics.whatif.settings import VictimOrderSettings
from preemptlens.analytics.whatif.tuning import (
    GENERATORS,
    Suggestion,
    TuningSettings,
    context,
    first_change,
    store,
    suggest,
)
from preemptlens.commands.serve import ServeSettings
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
        "--scheduler",
        help="print this scheduler's configuration snippets (slurm, kueue, kai, volcano, kubernetes, or all; "
        "default: the scheduler the cluster's jobs came from)",
    )
    parser.add_argument("--no-store", action="store_true", help="print only; do not write the suggestions table")


_SOURCE_SCHEDULERS = {"slurm": "slurm", "kubernetes": "kubernetes"}


def _scheduler_of(wh: Warehouse, cluster: str) -> str | None:
    """The scheduler the cluster's jobs came from, when their source names one (imports and simulations
    do not)."""
    rows = wh.query("SELECT source, count(*) AS n FROM jobs WHERE cluster = $c GROUP BY source ORDER BY n DESC",
                    {"c": cluster})["source"].to_list()
    return next((_SOURCE_SCHEDULERS[r] for r in rows if r in _SOURCE_SCHEDULERS), None)


def _print(s: Suggestion, position: int, scheduler: str | None) -> None:
    print(f"{position}. {s.title}")
    if s.current is not None or s.proposed is not None:
        print(f"   {s.setting}: {s.current or 'none'} -> {s.proposed or 'none'}")
    print(f"   evidence: {s.evidence}")
    print(f"   effect: {s.effect}")
    shown = sorted(s.snippets) if scheduler == "all" else [n for n in sorted(s.snippets) if n == scheduler]
    for name in shown:
        print(f"   --- {name}")
        print("\n".join("   " + line for line in s.snippets[name].rstrip("\n").splitlines()))


def _number(value: float | None, digits: int = 1) -> str:
    return "unknown" if value is None else f"{value:,.{digits}f}"


def _validation_lines(v: Validation) -> list[str]:
    """The replay's reproduction of the window, once, as a small table of observed against replayed."""
    errors = v.errors
    o, r = v.observed, v.replayed

    def error(key: str) -> str:
        value = errors[key]
        return "n/a" if value is None else f"{100 * value:.1f}%"

    limit = f"{100 * v.tolerance:.0f}%"
    state = "reproduces the recorded window" if v.ok else f"does NOT reproduce the recorded window within {limit}"
    return [
        f"replay under the policy in force {state}:",
        f"   {'':32} {'observed':>12} {'replayed':>12} {'error':>8}",
        f"   {'preemptions':32} {o.preemptions:>12,} {r.preemptions:>12,} {error('preemptions'):>8}",
        f"   {'lost GPU-hours':32} {_number(o.lost_gpu_h):>12} {_number(r.lost_gpu_h):>12} {error('lost_gpu_h'):>8}",
        f"   {'critical+high median wait (s)':32} {_number(o.high_wait_median_s, 0):>12} "
        f"{_number(r.high_wait_median_s, 0):>12} {error('high_wait_median_s'):>8}",
        # what decides the state: every figure the net is made of, per tier (Validation.checks)
        f"   {v.describe()}",
    ]


def run(args: argparse.Namespace, config: Config) -> int:
    settings = config.of(TuningSettings)
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        cluster = args.cluster or config.of(ClusterSettings).name or _only_cluster(wh)
        window = default_window(wh, cluster)
        window = Window(cluster, args.start or window.start, args.end or window.end)
        if window.end <= window.start:
            raise ConfigError(f"window {window.start.isoformat()} .. {window.end.isoformat()} is empty",
                              "give --end after --start")
        compare = config.of(VictimOrderSettings).compare
        ctx = context(wh, window, settings, compare, actions.settings_from(config),
                      config.of(ServeSettings).actions_interval_s, config.of(AnalyticsSettings))
        for line in _validation_lines(ctx.validation):
            print(line)
        draws = ctx.baseline_draws()
        if len(draws) > 1:
            spread = Interval(bound(draws, min), bound(draws, max), len(draws))
            shown = ", ".join(f"{label} {spread.shown(name, unit)}" for label, name, unit in (
                ("preemptions", "preemptions", ""), ("victims", "victim_jobs", ""),
                ("lost GPU-hours", "lost_gpu_h", ""), ("high-priority median wait", "high_wait_median_s", " s")))
            print(f"   replayed with inputs jittered within their measurement error and event order shuffled: {shown}")
        elif draws:
            print("   one replay (tuning.jitter_replays = 1): every replayed figure is a point")
        for note in ctx.workload.notes:
            print(f"   {note}")
        if not ctx.validation.ok:
            print("   the what-ifs below come from a replay that does not reproduce the past: read them as rough")
        found = suggest(ctx, args.only)
        if compare and ctx.victim_comparison is None:  # its rule was not asked for: the comparison still shows
            ctx.victim_comparison = victim_order.compare(ctx.workload, ctx.baseline)
        if ctx.victim_comparison is not None:
            for line in ctx.victim_comparison.lines():
                print(line)
        if not args.no_store:
            store(wh, ctx, found)
            first = first_change(found)
            # named as the suggestion is titled
            best = None if first is None or first.variant is None else replace(first.variant, label=first.title)
            if counterfactual.store_best(wh, ctx.workload, config.of(AnalyticsSettings), best, ctx.processes,
                                         settings.jitter_replays):
                print("the counterfactual's best alternative is now: "
                      + counterfactual.best_variant(ctx.workload, best)[0])
            scorecard.refresh(wh)
            verdict = scorecard.verdict_line(wh, cluster)
            if verdict:
                print(f"verdict: {verdict}")
        if not found:
            print("no suggestions: the data shows none of the problems the rules look for")
        scheduler = args.scheduler or _scheduler_of(wh, cluster)
        if found and scheduler is None:
            print("(each suggestion's configuration: --scheduler slurm, kueue, kai, volcano, kubernetes or all)")
        for position, s in enumerate(found, start=1):
            _print(s, position, scheduler)
        for line in ctx.withheld:
            print(f"withheld: {line}")
    return 0

