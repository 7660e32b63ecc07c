"""`preemptlens simulate`: simulate a cluster with ground truth into the warehouse.

It ends now by default (the last whole hour), so that `analyze`, `report` and `pilot` find recent weeks;
`--start` puts it anywhere. A staged pilot (`--pilot-pools`, `--pilot-start`) runs without preemption
everywhere and turns the policy on in the pilot pools at the pilot's start, as the article's adoption order
pilots it; the rest are the control pools. docs/tuning.md has a recipe for every verdict.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from datetime import UTC, datetime, timedelta

from preemptlens.analytics.simulator import (
    PolicyChange,
    PolicyConfig,
    SimConfig,
    WorkloadConfig,
    cluster_of,
    simulate_into,
)
from preemptlens.analytics.simulator.model import VICTIM_ORDERS
from preemptlens.config import ClusterSettings, Config, WarehouseSettings, number_argument
from preemptlens.errors import ConfigError
from preemptlens.times import TIME_HELP, parse_when
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
    parser.add_argument("--start", help=f"when the simulation starts: {TIME_HELP} (default: it ends at the last "
                        "whole hour)")
    parser.add_argument("--seed", type=number_argument(int, 0, 2**32 - 1), default=_DEFAULTS.workload.seed,
                        help="random seed")
    parser.add_argument("--load", type=number_argument(float, 0, 100), default=_DEFAULTS.workload.load,
                        help="work submitted as a share of capacity (default 0.85)")
    parser.add_argument("--hoarding-share",
                        type=number_argument(float, 0, 1), default=_DEFAULTS.workload.hoarding_share,
                        help="share of jobs that hold GPUs while idle")
    parser.add_argument("--creep", type=number_argument(float, 0, 1000), default=1.0,
                        help="multiply the teams' weekly growth of high-tier share (0 turns scope creep off)")
    parser.add_argument("--high-share", type=float, default=_DEFAULTS.workload.high_share,
                        help="share of jobs submitted high tier at the start (default 0.10; narrow priorities: less)")
    parser.add_argument("--critical-share", type=float, default=_DEFAULTS.workload.critical_share,
                        help="share of jobs submitted critical tier (default 0.02)")
    parser.add_argument("--max-gpus", type=int,
                        help="largest job in GPUs (default: the workload's sizes up to 64, capped by the pool)")
    parser.add_argument("--short-jobs", action="store_true",
                        help="short, small jobs: at most 8 GPUs, runs of at most 6 h, warm-ups of 30-120 s (victims "
                        "that recover quickly, as a first pilot picks them)")
    parser.add_argument("--checkpoint-share", type=float, default=_DEFAULTS.workload.checkpoint_share,
                        help="share of jobs that checkpoint (default 0.75; 1 makes every victim recoverable)")
    parser.add_argument("--final-checkpoint-share", type=float, default=_DEFAULTS.workload.final_checkpoint_share,
                        help="share of checkpointing jobs that save a final checkpoint when signalled (default 0.5)")
    parser.add_argument("--no-preemptor-records", action="store_true",
                        help="a black-box scheduler: runs do not name their preemptor or the reason")
    parser.add_argument("--no-preemption", action="store_true", help="simulate with preemption off")
    parser.add_argument("--trigger", type=number_argument(float, 0, 7 * 86_400), default=0.0,
                        help="seconds a job must have waited before it may preempt (the article's trigger "
                        "threshold; default 0: at once)")
    parser.add_argument("--pilot-pools",
                        help="comma-separated pools (or a number: the first N pools) where preemption is turned on "
                        "at --pilot-start; every other pool runs without preemption throughout (the control)")
    parser.add_argument("--pilot-start", help=f"when the pilot turns preemption on: {TIME_HELP}")
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


def _start(args: argparse.Namespace, now: datetime | None) -> datetime:
    if args.start:
        return parse_when(args.start, "--start", now).replace(microsecond=0)
    end = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
    # whole seconds: the simulator keeps every time integral (analytics.simulator.model)
    return end - timedelta(seconds=round(args.days * 86400.0))


def _pilot(args: argparse.Namespace, pools: tuple[str, ...], start: datetime, policy: PolicyConfig,
           now: datetime | None) -> tuple[PolicyConfig, tuple[PolicyChange, ...]]:
    """Preemption off everywhere, then on in the pilot pools from the pilot's start."""
    if not args.pilot_pools and not args.pilot_start:
        return policy, ()
    if not (args.pilot_pools and args.pilot_start):
        raise ConfigError("--pilot-pools and --pilot-start go together", "give both, or neither")
    if args.no_preemption:
        raise ConfigError("--no-preemption leaves nothing to pilot", "drop it, or drop --pilot-pools")
    text = args.pilot_pools.strip()
    chosen = pools[: int(text)] if text.isdigit() else tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in chosen if p not in pools]
    if unknown or not chosen or len(chosen) >= len(pools):
        raise ConfigError(f"--pilot-pools {args.pilot_pools!r}: pick some but not all of the pools "
                          f"{', '.join(pools)}" + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
                          "give more --pools, so that some stay as control pools")
    at = parse_when(args.pilot_start, "--pilot-start", now)
    offset = round((at - start).total_seconds())
    if not 0 < offset < args.days * 86400.0:
        raise ConfigError(f"--pilot-start {args.pilot_start!r} is not inside the simulated days "
                          f"({start.isoformat()} for {args.days:g} days)")
    return dataclasses.replace(policy, enabled=False), (PolicyChange(float(offset), chosen, policy),)


def config_from(args: argparse.Namespace, config: Config, now: datetime | None = None) -> SimConfig:
    if args.gpus < 8 or args.pools < 1:
        raise ConfigError("--gpus must be at least 8 and --pools at least 1")
    if args.creep < 0:
        raise ConfigError("--creep must be >= 0")
    teams = tuple(
        dataclasses.replace(team, high_share_growth=team.high_share_growth * args.creep)
        for team in _DEFAULTS.workload.teams
    )
    workload = WorkloadConfig(
        seed=args.seed, load=args.load, hoarding_share=args.hoarding_share, teams=teams,
        high_share=args.high_share, critical_share=args.critical_share, checkpoint_share=args.checkpoint_share,
        final_checkpoint_share=args.final_checkpoint_share,
    )
    if args.short_jobs:
        workload = dataclasses.replace(workload, sizes=(1, 2, 4, 8), size_weights=(0.4, 0.2, 0.2, 0.2),
                                       work_sigma=0.8, work_max_s=6 * 3600.0, warmup_s_range=(30.0, 120.0))
    if args.max_gpus is not None:
        kept = [(size, w) for size, w in zip(workload.sizes, workload.size_weights, strict=True)
                if size <= args.max_gpus]
        if not kept:
            raise ConfigError(f"--max-gpus {args.max_gpus}: no job size fits (sizes {workload.sizes})")
        workload = dataclasses.replace(workload, sizes=tuple(k[0] for k in kept),
                                       size_weights=tuple(k[1] for k in kept))
    policy = PolicyConfig(
        enabled=not args.no_preemption,
        min_run_s=args.min_run,
        grace_s=args.grace,
        requeue_hold_s=args.requeue_hold,
        victim_order=args.victim_order,
        trigger_wait_s=args.trigger,
    )
    pools = cluster_of(args.gpus, pools=args.pools)
    start = _start(args, now)
    policy, changes = _pilot(args, tuple(p.name for p in pools), start, policy, now)
    return SimConfig(
        cluster=args.cluster or config.of(ClusterSettings).name or _DEFAULTS.cluster,
        start=start,
        days=args.days,
        pools=pools,
        workload=workload,
        policy=policy,
        changes=changes,
        sample_step_s=args.step,
        sample_gap_share=args.gap_share,
        records_preemptor=not args.no_preemptor_records,
    )


def run(args: argparse.Namespace, config: Config) -> int:
    sim = config_from(args, config)
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        summary = simulate_into(wh, sim, progress=lambda message: print(message, file=sys.stderr, flush=True))
    for line in summary.lines():
        print(line)
    end = sim.start + timedelta(seconds=sim.horizon_s)
    print(f"from {sim.start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC")
    for change in sim.changes:
        at = sim.start + timedelta(seconds=change.at_s)
        control = [p.name for p in sim.pools if p.name not in change.pools]
        print(f"pilot: preemption on in {', '.join(change.pools)} from {at:%Y-%m-%d %H:%M} UTC; control pools "
              f"{', '.join(control)}. After `preemptlens analyze`, evaluate it with: preemptlens pilot "
              f"{sim.cluster}-pilot --cluster {sim.cluster} --pools {','.join(change.pools)} --control "
              f"{','.join(control)} --start {at:%Y-%m-%dT%H:%M:%SZ} --what 'preemption on'")
    return 0
