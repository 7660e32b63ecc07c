"""`preemptlens act`: one cycle of the enabled actions (serve's `actions` job runs the same on an interval).

Each action in enforce mode gets its effector from the registry
(preemptlens.registry.EFFECTORS), built from the scheduler's connection
settings; the engine (analytics/actions.py) decides and writes the audit table
`actions`, the effector changes the scheduler. The first cycle of every start
reconciles the audit rows with what the schedulers hold.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Mapping, Set
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from preemptlens.errors import ConfigError
from preemptlens.registry import EFFECTORS
from preemptlens.times import TIME_HELP

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from preemptlens.analytics.actions import ActionSettings
    from preemptlens.config import Config
    from preemptlens.contract import Effector


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--now", help=f"evaluate as of this time (default: now); {TIME_HELP}")


def build_effectors(config: Config, actions: Mapping[str, ActionSettings],
                    leftover: Set[str] = frozenset()) -> dict[str, tuple[str, Effector]]:
    """(cluster, effector) of every enabled action in enforce mode (a missing one is a configuration error), and,
    where one can be built, of an action whose enforced holds are still open (`leftover`), to release them."""
    built: dict[str, tuple[str, Effector]] = {}
    for name, s in actions.items():
        required = s.enabled and s.enforce
        if not required and name not in leftover:
            continue
        if name not in EFFECTORS:
            if required:
                raise ConfigError(f"{name}: mode is enforce but this installation has no effector for it",
                                  f"set {name}.mode = \"dry-run\"")
            continue
        try:
            built[name] = importlib.import_module(EFFECTORS[name]).build_effector(name, config)
        except ConfigError:
            if required:
                raise
            log.warning("%s: its enforced holds are open, but no effector can be built to release them", name)
    return built


def run(args: argparse.Namespace, config: Config) -> int:
    from preemptlens.analytics import actions
    from preemptlens.config import WarehouseSettings
    from preemptlens.times import parse_when
    from preemptlens.warehouse import Warehouse

    settings = actions.settings_from(config)
    now = parse_when(args.now, "--now") if args.now else datetime.now(UTC)
    warehouse = config.of(WarehouseSettings)
    with Warehouse(warehouse.path, future_slack_s=warehouse.future_slack_s) as wh:
        leftover = actions.open_enforced(wh)
        if not leftover and not any(s.enabled for s in settings.values()):
            print("no action is enabled (set enabled = true in [kueue_boost], [kai_protect] or [slurm_protect])")
            return 0
        effectors = build_effectors(config, settings, leftover)
        reports = actions.run(wh, settings, effectors, now)
    for report in reports:
        print(report.summary())
    return 1 if any(r.failed for r in reports) else 0
