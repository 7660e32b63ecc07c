"""`preemptlens pilot NAME`: evaluate a declared pilot (difference in differences against its control pools).

A pilot comes from the configuration ([pilot] pilots.NAME) or, when NAME is not declared there, from the
command line (--pools, --control, --start, --what, optionally --end, --tiers, --cluster); options given
with a declared NAME override its settings. Without NAME it lists the declared pilots and the pools and
tiers that suit a pilot. Reads the views `preemptlens analyze` maintains; run that first.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preemptlens.analytics.pilot import Pilot
    from preemptlens.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="the pilot to evaluate (default: list pilots and candidates)")
    parser.add_argument("--cluster", help="cluster of the pilot (default: cluster.name, else the warehouse's only "
                        "cluster)")
    parser.add_argument("--pools", help="comma-separated pools that changed")
    parser.add_argument("--control", help="comma-separated control pools that did not change")
    parser.add_argument("--tiers", help="comma-separated tiers the change concerns")
    parser.add_argument("--start", help="time of the change, ISO 8601 (UTC unless it says otherwise)")
    parser.add_argument("--end", help="end of the pilot, ISO 8601 (default: still running)")
    parser.add_argument("--what", help="what changed, e.g. 'preemption on for low-tier victims'")


def _from_args(args: argparse.Namespace, config: Config) -> Pilot:
    from preemptlens.analytics.pilot import declared, pilot_from
    from preemptlens.config import ClusterSettings

    spec: dict[str, object] = {}
    known = declared(config)
    if args.name in known:
        pilot = known[args.name]
        spec = {
            "cluster": pilot.cluster, "pools": list(pilot.pools), "control": list(pilot.control),
            "tiers": list(pilot.tiers), "start": pilot.start, "end": pilot.end, "what": pilot.what,
        }
    for key in ("cluster", "pools", "control", "tiers", "start", "end", "what"):
        if getattr(args, key):
            spec[key] = getattr(args, key)
    return pilot_from(args.name, spec, config.of(ClusterSettings).name)


def run(args: argparse.Namespace, config: Config) -> int:
    from preemptlens.analytics.pilot import (
        PilotSettings,
        candidates,
        declared,
        evaluate,
        on_cluster,
        readiness,
        render,
        render_candidates,
    )
    from preemptlens.config import WarehouseSettings
    from preemptlens.warehouse import Warehouse

    th = config.of(PilotSettings)
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        if args.name is None:
            pilots = declared(config)
            if pilots:
                print("declared pilots: " + ", ".join(sorted(pilots)))
            else:
                print("no pilots declared ([pilot] pilots.NAME in the configuration)")
            for line in readiness(wh.query):
                print(line)
            print(render_candidates(candidates(wh.query)))
            return 0
        pilot = _from_args(args, config)
        if not pilot.cluster:
            pilot = on_cluster(pilot, wh.query("SELECT DISTINCT cluster FROM jobs ORDER BY 1")["cluster"].to_list())
        print(render(evaluate(wh.query, pilot, th)))
    return 0
