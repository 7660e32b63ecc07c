"""Replay speed: one policy over a simulated month of a large cluster, the cost-aware victim order beside it, and
a 10-policy sweep.

    python benchmarks/bench_replay.py              # 4,096 GPUs, 30 days (the issue's target)
    python benchmarks/bench_replay.py --gpus 512 --days 7

The workload comes from the simulator's generator directly (the replay's input
is JobSpecs; reading them from a warehouse is timed by the tests), and the
sweep reuses one process pool across the cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from preemptlens.analytics.simulator.model import PolicyConfig, SimConfig, cluster_of
from preemptlens.analytics.simulator.workload import generate_jobs
from preemptlens.analytics.whatif.replay import PolicyBasis, Variant, Window, Workload, run_variant, sweep


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

    workload = Workload(
        window=Window(sim.cluster, sim.start, sim.start + timedelta(seconds=sim.horizon_s)),
        pools=sim.pools,
        jobs=tuple(jobs),
        actual=PolicyBasis(sim.policy, {}),
        skipped={},
        notes=(),
    )
    started, cpu = time.perf_counter(), time.process_time()
    figures = run_variant(workload, Variant("in force", sim.policy))
    one, one_cpu = time.perf_counter() - started, time.process_time() - cpu
    # The cost-aware order visits every node with victims where today's stops at the first cheap enough one.
    started, cpu = time.perf_counter(), time.process_time()
    by_cost = run_variant(workload, Variant("victim order cost", replace(sim.policy, victim_order="cost")))
    cost, cost_cpu = time.perf_counter() - started, time.process_time() - cpu

    variants = [
        Variant(f"min_run {m:g}", replace(PolicyConfig(), min_run_s=m))
        for m in [0.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 5400.0, 7200.0][: args.policies]
    ]
    started, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    sweep(workload, variants, os.cpu_count())
    many = time.perf_counter() - started
    many_cpu, many_children = time.process_time() - cpu, _children_cpu() - children
    # Other work on the machine slows both figures: the load average tells how much.
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"
    print(f"cluster            {args.gpus} GPUs, {args.days:g} days, {len(jobs)} jobs (generated in {generated:.1f} s)")
    print(f"one policy         {one:8.1f} s   CPU {one_cpu:.1f} s ({figures.preemptions} preemptions; target < 20 s)")
    print(f"victim order       today {one:.1f} s (CPU {one_cpu:.1f} s), "
          f"cost-aware {cost:.1f} s (CPU {cost_cpu:.1f} s); "
          f"work thrown away {_gpu_h(figures.thrown_away_gpu_h)} -> {_gpu_h(by_cost.thrown_away_gpu_h)} GPU-h, "
          f"preemptions {figures.preemptions} -> {by_cost.preemptions}")
    print(f"sweep of {len(variants):2d}        {many:8.1f} s   CPU {many_cpu:.1f} s + workers {many_children:.1f} s "
          f"on {os.cpu_count()} cores (target < 120 s)")
    print(f"load average       {load}")


def _gpu_h(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.0f}"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
