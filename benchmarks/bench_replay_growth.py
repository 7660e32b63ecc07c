"""Does one replay grow with its events (times a logarithm), not faster? And does a change to the engine keep
every replay's outcome? (issue 35, item 1)

    python benchmarks/bench_replay_growth.py                          # 1,024, 4,096, 16,384 GPUs x 7 days
    python benchmarks/bench_replay_growth.py --gpus 1024 4096 --days 3
    python benchmarks/bench_replay_growth.py --record /tmp/before.json   # the identity cases, outcomes saved
    python benchmarks/bench_replay_growth.py --compare /tmp/before.json  # the same cases, compared run by run

Growth: per size, a workload from the simulator's generator (seed 1, one pool) replayed under the
counterfactual's scenarios (analytics/whatif/counterfactual.py `compute`): without preemption (drained, as
the counterfactual replays it), the policy in force, a trigger threshold, preemptlens's action at its defaults
(its cycles read every running run) and the cost-aware victim order (the bound). Each replay's CPU seconds in
this process beside its events (arrivals, run ends, eligibilities and the other timed events the loop pops);
then, between sizes, each figure's growth scaled to 4x the GPUs beside the events' and the jobs'. A replay in
step with its events grows about as they do (x a logarithm); the square of the work grows 16x per 4x. One run, no
repeats: say which machine and load the figures came from (printed).

Identity (--record, --compare): small simulated workloads (three seeds, two pools, a third of the jobs with a
time limit) replayed under every scheduler model, both backfills, a backfill window, the cost order, a trigger,
minimum run times and preemptlens's actions; every run's job, run number, start, end, state, GPUs and
preemptor is saved, or compared with what an earlier build saved (run the --record with that build first on
the path, e.g. `PYTHONPATH=/work/main`). Any difference is printed with its case and first differing run, and
the exit status is 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from preemptlens.analytics.actions import ACTIONS
from preemptlens.analytics.simulator.engine import Outcome, _Scheduler, paused_gc
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec, SimConfig, cluster_of
from preemptlens.analytics.simulator.workload import generate_jobs


def _load() -> str:
    return "load average " + " ".join(f"{v:.1f}" for v in os.getloadavg())


def workload(gpus: int, days: float, seed: int, pools: int = 1,
             limited: bool = False) -> tuple[list[JobSpec], tuple[PoolSpec, ...], PolicyConfig, float]:
    base = SimConfig()
    sim = SimConfig(days=days, pools=cluster_of(gpus, pools=pools),
                    workload=dataclasses.replace(base.workload, seed=seed))
    jobs = generate_jobs(sim)
    if limited:
        # A third of the jobs state a time limit (whole hours above their start-up and work), as sacct's do.
        jobs = [dataclasses.replace(j, time_limit_s=math.ceil((j.startup_s + j.work_s) * 1.2 / 3600) * 3600.0)
                if k % 3 == 0 else j for k, j in enumerate(jobs)]
    return jobs, sim.pools, sim.policy, sim.horizon_s


class Counted(_Scheduler):
    """The engine, counting the events its loop pops (arrivals come from their own sorted list)."""

    popped = 0

    def _push(self, t: float, kind: int, item: int) -> None:
        self.popped += 1
        super()._push(t, kind, item)


def replay(jobs: Sequence[JobSpec], pools: Sequence[PoolSpec], policy: PolicyConfig, horizon_s: float
           ) -> tuple[Outcome, float, int]:
    """The outcome, the CPU seconds it took and its events (arrivals, run ends and every other pushed one)."""
    with paused_gc():
        began = time.process_time()
        scheduler = Counted(jobs, pools, policy, horizon_s, 60.0)
        out = scheduler.run(None)
        cpu = time.process_time() - began
    # Run ends are pushed straight onto the heap by _start: one per run started.
    started = sum(1 for r in out.runs if r.start_s is not None)
    return out, cpu, len(scheduler.arrivals) + scheduler.popped + started


def scenarios(policy: PolicyConfig) -> list[tuple[str, PolicyConfig, bool]]:
    """(name, policy, drained) as the counterfactual replays them."""
    return [
        ("no preemption", dataclasses.replace(policy, enabled=False), True),
        ("in force", policy, True),
        ("trigger 900 s", dataclasses.replace(policy, trigger_wait_s=900.0), True),
        ("action (kai_protect)", dataclasses.replace(policy, protection=ACTIONS["kai_protect"]().replayed(300.0)),
         True),
        ("cost order (bound)", dataclasses.replace(policy, victim_order="cost"), True),
    ]


def growth(sizes: Sequence[int], days: float) -> None:
    print(f"{os.cpu_count()} cores; {_load()}; {', '.join(map(str, sizes))} GPUs x {days:g} days, one pool, seed 1",
          flush=True)
    found: dict[str, list[tuple[float, int]]] = {}
    submitted: list[int] = []  # the work itself, beside which the events and each replay's CPU seconds grow
    for gpus in sizes:
        jobs, pools, policy, horizon = workload(gpus, days, 1)
        submitted.append(len(jobs))
        print(f"  {gpus:>6} GPUs  {len(jobs):,} jobs", flush=True)
        for name, variant, drained in scenarios(policy):
            _, cpu, events = replay(jobs, pools, variant, math.inf if drained else horizon)
            found.setdefault(name, []).append((cpu, events))
            print(f"  {gpus:>6} GPUs  {name:22} cpu {cpu:8.2f} s  events {events:>10,}  {_load()}", flush=True)
    print(f"\n{'scenario':24}" + "".join(f"{g:>8,} GPUs: cpu, events" for g in sizes)
          + "".join(f"   per 4x {a}->{b}: cpu / events" for a, b in itertools.pairwise(sizes)))
    row = "".join(f"{'':>16} {jobs:>10,}" for jobs in submitted)
    for (a, ga), (b, gb) in itertools.pairwise(zip(submitted, sizes, strict=True)):
        row += f"   {'jobs':>18} / {(b / a) ** (math.log(4) / math.log(gb / ga)):.1f}x"
    print(f"{'(jobs submitted)':24}{row}")
    for name, cells in found.items():
        row = "".join(f"{cpu:>14.2f} s {events:>10,}" for cpu, events in cells)
        for (a, ga), (b, gb) in itertools.pairwise(zip(cells, sizes, strict=True)):
            scale = math.log(4) / math.log(gb / ga)
            row += f"   {(b[0] / a[0]) ** scale:>17.1f}x / {(b[1] / a[1]) ** scale:.1f}x"
        print(f"{name:24}{row}")
    print(_load())


def identity_cases() -> list[tuple[str, int, PolicyConfig]]:
    base = PolicyConfig()
    policies: list[tuple[str, PolicyConfig]] = [
        ("generic reserve", base),
        ("generic greedy", dataclasses.replace(base, backfill="greedy")),
        ("generic window 4h", dataclasses.replace(base, backfill_window_s=4 * 3600.0)),
        ("generic no preemption", dataclasses.replace(base, enabled=False)),
        ("generic cost order", dataclasses.replace(base, victim_order="cost")),
        ("generic trigger 600 min-run 1800", dataclasses.replace(base, trigger_wait_s=600.0, min_run_s=1800.0)),
        ("generic kai_protect", dataclasses.replace(base, protection=ACTIONS["kai_protect"]().replayed(300.0))),
        ("slurm", dataclasses.replace(base, scheduler="slurm")),
        ("slurm youngest first, kill at grace end", dataclasses.replace(
            base, scheduler="slurm", youngest_first=True, kill_at_grace_end=True)),
        ("slurm_protect", dataclasses.replace(
            base, scheduler="slurm", protection=ACTIONS["slurm_protect"]().replayed(300.0))),
        ("kueue greedy", dataclasses.replace(base, scheduler="kueue", backfill="greedy")),
        ("kueue_boost", dataclasses.replace(base, scheduler="kueue",
                                            protection=ACTIONS["kueue_boost"]().replayed(300.0))),
        ("kai", dataclasses.replace(base, scheduler="kai")),
    ]
    return [(f"seed {seed}: {name}", seed, policy) for seed in (1, 2, 3) for name, policy in policies]


def runs_of(out: Outcome) -> list[list[Any]]:
    return [[r.job, r.run, r.start_s, r.end_s, r.state, list(r.gpu_ids), r.preemptor] for r in out.runs]


def identity(record: Path | None, compare: Path | None, gpus: int, days: float) -> int:
    before: dict[str, list[list[Any]]] = json.loads(compare.read_text()) if compare else {}
    found: dict[str, list[list[Any]]] = {}
    differ = 0
    cpu = 0.0
    loads: dict[int, tuple[list[JobSpec], tuple[PoolSpec, ...], float]] = {}
    for name, seed, policy in identity_cases():
        if seed not in loads:
            jobs, pools, _, horizon = workload(gpus, days, seed, pools=2, limited=True)
            loads[seed] = (jobs, pools, horizon)
        jobs, pools, horizon = loads[seed]
        out, spent, _ = replay(jobs, pools, policy, horizon)
        cpu += spent
        # through JSON, as the record was: floats and tuples read back alike
        found[name] = json.loads(json.dumps(runs_of(out)))
        preempted = sum(1 for r in out.runs if r.state == "preempted")
        if compare:
            was = before.get(name)
            if was is None:
                print(f"  {name}: not in {compare}")
                differ += 1
            elif was != found[name]:
                first = next((k for k, (a, b) in enumerate(zip(was, found[name], strict=False)) if a != b),
                             min(len(was), len(found[name])))
                print(f"  {name}: DIFFERS at run {first} of {len(was)}: "
                      f"{was[first] if first < len(was) else None} -> "
                      f"{found[name][first] if first < len(found[name]) else None}")
                differ += 1
            else:
                print(f"  {name}: same ({len(was)} runs, {preempted} preempted)")
        else:
            print(f"  {name}: {len(found[name])} runs, {preempted} preempted")
    if record:
        record.write_text(json.dumps(found))
    print(f"{len(found)} cases, {differ} differ; replays {cpu:.1f} s CPU; {_load()}")
    return 1 if differ else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, nargs="+", default=[1024, 4096, 16384],
                        help="cluster sizes, GPUs (identity: the first)")
    parser.add_argument("--days", type=float, default=7.0, help="simulated days")
    parser.add_argument("--record", type=Path, help="replay the identity cases and save their runs here")
    parser.add_argument("--compare", type=Path, help="replay the identity cases and compare with this record")
    args = parser.parse_args()
    if args.record or args.compare:
        gpus = args.gpus[0] if args.gpus != parser.get_default("gpus") else 256
        days = args.days if args.days != parser.get_default("days") else 3.0
        sys.exit(identity(args.record, args.compare, gpus, days))
    growth(sorted(args.gpus), args.days)


if __name__ == "__main__":
    main()
