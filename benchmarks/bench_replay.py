"""Replay speed: one policy over a simulated month of a large cluster, and a 10-policy sweep.

    python benchmarks/bench_replay.py              # 4,096 GPUs, 30 days (the issue's target)
    python benchmarks/bench_replay.py --gpus 512 --days 7

The workload comes from the simulator's generator directly (the replay's input
is JobSpecs; reading them from a warehouse is timed by the tests), and the
sweep reuses one process pool across the cores.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from datetime import timedelta

from analytics.replay import PolicyBasis, Variant, Window, Workload, outcome_figures, sweep
from analytics.sim_engine import simulate_jobs
from analytics.sim_model import PolicyConfig, SimConfig, cluster_of
from analytics.sim_workload import generate_jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--policies", type=int, default=10)
    args = parser.parse_args()
    sim = SimConfig(days=args.days, pools=cluster_of(args.gpus, pools=2))
    started = time.perf_counter()
    jobs = generate_jobs(sim)
    generated = time.perf_counter() - started

    started = time.perf_counter()
    figures = outcome_figures(simulate_jobs(jobs, sim.pools, sim.policy, sim.horizon_s))
    one = time.perf_counter() - started

    workload = Workload(
        window=Window(sim.cluster, sim.start, sim.start + timedelta(seconds=sim.horizon_s)),
        pools=sim.pools,
        jobs=tuple(jobs),
        actual=PolicyBasis(sim.policy, {}),
        skipped={},
        notes=(),
    )
    variants = [
        Variant(f"min_run {m:g}", replace(PolicyConfig(), min_run_s=m))
        for m in [0.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 5400.0, 7200.0][: args.policies]
    ]
    started = time.perf_counter()
    sweep(workload, variants, os.cpu_count())
    many = time.perf_counter() - started
    print(f"cluster            {args.gpus} GPUs, {args.days:g} days, {len(jobs)} jobs (generated in {generated:.1f} s)")
    print(f"one policy         {one:8.1f} s   ({figures.preemptions} preemptions; target < 20 s)")
    print(f"sweep of {len(variants):2d}        {many:8.1f} s   on {os.cpu_count()} cores (target < 120 s)")


if __name__ == "__main__":
    main()
