"""`preemptlens simulate`: simulate a cluster with ground truth into the warehouse."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from preemptlens.analytics.simulator import PolicyConfig, SimConfig, WorkloadConfig, cluster_of, simulate_into
from preemptlens.analytics.simulator.model import VICTIM_ORDERS
from preemptlens.config import ClusterSettings, Config, WarehouseSettings, number_argument
from preemptlens.errors import ConfigError
from preemptlens.warehouse import Warehouse

_DEFAULTS = SimConfig()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", help="cluster name in every row (default: cluster.name, else 'sim')")
    parser.add_argument("--gpus", type=number_argument(int, 8, 1_000_000), default=64,
                        help="GPUs in the cluster, in nodes of 8 (default 64)")
    parser.add_argument("--pools", type=number_argument(int, 1, 1000), default=1,
                        help="split the nodes into this many pools (default 1)")
    parser.add_argument("--days", type=number_argument(float, 0.01, 3660), default=_DEFAULTS.days,
                        help="simulated days (default 7)")
    parser.add_argument("--seed", type=number_argument(int, 0, 2**32 - 1), default=_DEFAULTS.workload.seed,
                        help="random seed")
    parser.add_argument("--load", type=number_argument(float, 0, 100), default=_DEFAULTS.workload.load,
                        help="work submitted as a share of capacity (default 0.85)")
    parser.add_argument("--hoarding-share",
                        type=number_argument(float, 0, 1), default=_DEFAULTS.workload.hoarding_share,
                        help="share of jobs that hold GPUs while idle")
    parser.add_argument("--creep", type=number_argument(float, 0, 1000), default=1.0,
                        help="multiply the teams' weekly growth of high-tier share (0 turns scope creep off)")
    parser.add_argument("--no-preemption", action="store_true", help="simulate with preemption off")
    parser.add_argument("--min-run", type=number_argument(float, 0, 7 * 86_400), default=_DEFAULTS.policy.min_run_s,
                        help="seconds a run must have run before it may be preempted")
    parser.add_argument("--grace", type=number_argument(float, 0, 86_400), default=_DEFAULTS.policy.grace_s,
                        help="seconds between the preemption signal and the kill")
    parser.add_argument("--requeue-hold",
                        type=number_argument(float, 0, 7 * 86_400), default=_DEFAULTS.policy.requeue_hold_s,
                        help="seconds a requeued victim waits before it is eligible")
    parser.add_argument("--victim-order", choices=VICTIM_ORDERS, default=_DEFAULTS.policy.victim_order,
                        help="how victims are chosen: priority (lowest tier, then youngest; default) or cost "
                        "(least live cost, docs/figures.md section 8)")
    parser.add_argument("--step", type=number_argument(int, 1, 86_400), default=_DEFAULTS.sample_step_s,
                        help="GPU sample step in seconds")
    parser.add_argument("--gap-share", type=number_argument(float, 0, 1), default=0.0,
                        help="share of host-hours with no GPU samples (exporter down; default 0)")


def config_from(args: argparse.Namespace, config: Config) -> SimConfig:
    if args.gpus < 8 or args.pools < 1:
        raise ConfigError("--gpus must be at least 8 and --pools at least 1")
    if args.creep < 0:
        raise ConfigError("--creep must be >= 0")
    teams = tuple(
        dataclasses.replace(team, high_share_growth=team.high_share_growth * args.creep)
        for team in _DEFAULTS.workload.teams
    )
    workload = WorkloadConfig(seed=args.seed, load=args.load, hoarding_share=args.hoarding_share, teams=teams)
    policy = PolicyConfig(
        enabled=not args.no_preemption,
        min_run_s=args.min_run,
        grace_s=args.grace,
        requeue_hold_s=args.requeue_hold,
        victim_order=args.victim_order,
    )
    return SimConfig(
        cluster=args.cluster or config.of(ClusterSettings).name or _DEFAULTS.cluster,
        days=args.days,
        pools=cluster_of(args.gpus, pools=args.pools),
        workload=workload,
        policy=policy,
        sample_step_s=args.step,
        sample_gap_share=args.gap_share,
    )


def run(args: argparse.Namespace, config: Config) -> int:
    sim = config_from(args, config)
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        summary = simulate_into(wh, sim, progress=lambda message: print(message, file=sys.stderr, flush=True))
    for line in summary.lines():
        print(line)
    return 0
