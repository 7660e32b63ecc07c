"""`preemptlens analyze`: refresh the analytics (idle stretches, views, the counterfactual, the verdict) and
print the answer: does preemption pay here?

Incremental by default: only the gpu_samples that loads since the last run
wrote are rescanned, only the views whose inputs changed are recomputed
(none when nothing changed) and a cluster whose inputs did not change is not
replayed again; `--full` rebuilds everything.
"""

from __future__ import annotations

import argparse
import dataclasses

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.whatif.scorecard import render
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.config import Config, WarehouseSettings
from preemptlens.contract import TIERS
from preemptlens.errors import ConfigError
from preemptlens.warehouse import Warehouse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--full", action="store_true", help="rebuild every derived table from the raw tables")
    parser.add_argument("--quiet", action="store_true", help="do not print the answer and the readiness scorecard")
    parser.add_argument(
        "--tier-weights",
        help="value of a GPU-second of each tier's work for this run, e.g. critical=8,high=4 (tiers not named "
        "keep analytics.tier_weights): the net benefit and the verdict's net depend on them",
    )


def tier_weights(text: str, configured: dict[str, float]) -> dict[str, float]:
    weights = dict(configured)
    for part in text.split(","):
        tier, sep, value = part.partition("=")
        tier = tier.strip()
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not sep or tier not in TIERS or not 0 <= number < 1e6:
            raise ConfigError(f"--tier-weights: {part.strip()!r} is not tier=weight",
                              f"tiers: {', '.join(TIERS)}; weights from 0, e.g. critical=8,high=4")
        weights[tier] = number
    return weights


def run(args: argparse.Namespace, config: Config) -> int:
    params = config.of(AnalyticsSettings)
    if args.tier_weights:
        params = dataclasses.replace(params, tier_weights=tier_weights(args.tier_weights, params.tier_weights))
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        report = analyze(wh, params, full=args.full, tuning=config.of(TuningSettings))
        # the answer first; how it was computed after it
        if not args.quiet:
            print(render(wh))
        timings = ", ".join(f"{k} {v:.2f} s" for k, v in report.seconds.items())
        if report.unchanged_since is not None:
            print(f"nothing changed since the analyze of {report.unchanged_since:%Y-%m-%d %H:%M:%S} UTC (no load, "
                  f"no setting, no live cost): its {len(report.kept)} views are current; --full recomputes them")
        else:
            kept = f", {len(report.kept)} unchanged" if report.kept else ""
            built = f"{len(report.views)} view{'' if len(report.views) == 1 else 's'} refreshed"
            print(
                f"idle stretches: {report.stretches.mode} refresh, {report.stretches.stretches} stretches "
                f"({_steps(report.sample_steps)}); {built}{kept}; {timings}"
            )
        for cluster, what in report.counterfactual.items():
            if what != "unchanged":
                print(f"counterfactual of {cluster}: {what}")
    return 0


def _steps(steps: dict[str, float]) -> str:
    """The sampling step the idle stretches were read at: one for every cluster, or each cluster's."""
    if not steps:
        return "no GPU samples"
    if len(set(steps.values())) == 1:
        return f"sampling step {next(iter(steps.values())):g} s"
    return "sampling steps " + ", ".join(f"{cluster} {step:g} s" for cluster, step in steps.items())
