"""Which of the replay's guessed inputs makes it miss the simulated window it replays.

    python benchmarks/bench_replay_truth.py                       # 256 GPUs, 7 days: the demo's miss in ~30 s
    python benchmarks/bench_replay_truth.py --gpus 256 --days 21  # the README's demo itself (~1 min)
    python benchmarks/bench_replay_truth.py --step 300            # samples every 5 min: the grid's step differs too

The demo's cluster (`preemptlens demo`'s settings) is simulated and analysed into a new warehouse; its window is
read back as the replay reads it (`load_workload`) and replayed under the simulator's own policy, once as read,
then with one group of the inputs the replay guesses replaced by the simulator's truth (the same job's JobSpec),
then with the sample grid the replay read from the record (`sample_grid.sql`) replaced by the engine's old
default (60 s from the replay's origin). Each row: whether the validation passes, its worst error, a few of the
figures it checks, and how many runs are the record's own (same start, end, state and idle stretches). The
record's idle stretches start on the sample grid of the wall clock, and its origin (the window's first
submission) is off that grid by a fraction of a step: an engine that counted the grid from the origin moved every
hoarder's idle stretches, and through them checkpoints, ends and who is preempted when (the demo's replay missed
its own window by 21.5% that way).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import Simulation, simulate, simulate_into
from preemptlens.analytics.simulator.engine import Outcome
from preemptlens.analytics.simulator.model import JobSpec
from preemptlens.analytics.whatif.replay import (
    Figures,
    Variant,
    Workload,
    default_window,
    load_workload,
    observed_figures,
    replay_outcome,
    run_variant,
    validation,
)
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.commands.demo import demo_config
from preemptlens.warehouse import Warehouse

# The input groups the replay guesses or measures, each replaced by the simulator's truth in turn.
GROUPS: dict[str, tuple[str, ...]] = {
    "warm-ups": ("warmup_s",),
    "final checkpoints at the signal": ("final_checkpoint", "save_s"),
    "start-ups": ("startup_s",),
    "work": ("work_s", "fail_after_work_s"),
    "checkpoint intervals": ("checkpoint_interval_s", "checkpoint_schedule"),
    "time limits (reservations)": ("time_limit_s",),
    "hoarding: idle stretch": ("hoard_idle_s",),
    "hoarding: active span": ("hoard_active_s",),
}
SHOWN = (("all", "preemptions"), ("all", "lost_gpu_h"), ("low", "wait_p50_s"), ("normal", "wait_p50_s"),
         ("normal", "queue_gpu_h"), ("high", "queue_gpu_h"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--step", type=int, default=60,
                        help="GPU sample step in seconds")
    args = parser.parse_args()
    # A fixed week, so that every run simulates the same cluster.
    week = datetime(2026, 12, 7, 12, tzinfo=UTC)
    sim_config = dataclasses.replace(demo_config(args.days, args.gpus, args.seed, week), sample_step_s=args.step)
    with tempfile.TemporaryDirectory() as folder, Warehouse(Path(folder) / "w.duckdb") as wh:
        began = time.perf_counter()
        simulate_into(wh, sim_config)
        analyze(wh, AnalyticsSettings(), tuning=TuningSettings(jitter_replays=0, processes=1))
        sim = simulate(sim_config)
        window = default_window(wh, sim_config.cluster)
        workload = load_workload(wh, window, TuningSettings())
        print(f"{args.gpus} GPUs, {args.days} days, {len(workload.jobs)} jobs; simulated and analysed in "
              f"{time.perf_counter() - began:.0f} s; replay origin {window.start:%H:%M:%S}, "
              f"{_grid_shift(sim, window.start):g} s after the sample grid")
        truth = {j.job_id: j for j in sim.jobs}
        every = tuple(name for names in GROUPS.values() for name in names)
        cases: list[tuple[str, Workload]] = [("as read (the replay's guesses)", workload)]
        cases += [(f"true {label}", _with_truth(workload, truth, names)) for label, names in GROUPS.items()]
        cases.append(("every input true", _with_truth(workload, truth, every)))
        cases.append((f"grid 60 s from the origin, not {workload.grid_s:g} s from +{workload.grid_origin_s:g} s",
                      dataclasses.replace(workload, grid_s=60.0, grid_origin_s=0.0)))
        print(f"{'replay':45} {'ok':>3} {'worst':>7} " + " ".join(f"{t + ' ' + n:>18}" for t, n in SHOWN)
              + "  runs as recorded")
        print(_row("record", None, None, [_figure(observed_figures(wh, window), t, n) for t, n in SHOWN], None))
        for label, case in cases:
            replayed = run_variant(case, Variant("in force", sim_config.policy))
            plain = run_variant(case, Variant("none", dataclasses.replace(sim_config.policy, enabled=False)))
            checked = validation(wh, case, replayed, (plain,), TuningSettings().validation_tolerance)
            worst = max((c for c in checked.checks if c.decides and c.error is not None),
                        key=lambda c: c.error or 0.0, default=None)
            out = replay_outcome(case, Variant("in force", sim_config.policy))
            same = _runs_as_recorded(sim, out, (case.window.start - sim_config.start).total_seconds())
            print(_row(label, checked.ok, None if worst is None else worst.error,
                       [_figure(replayed, t, n) for t, n in SHOWN], same)
                  + ("" if worst is None else f"; worst: {worst.label}"))


def _with_truth(workload: Workload, truth: dict[str, JobSpec], names: Sequence[str]) -> Workload:
    jobs = tuple(dataclasses.replace(j, **{n: getattr(truth[j.job_id], n) for n in names}) for j in workload.jobs)
    return dataclasses.replace(workload, jobs=jobs)


def _grid_shift(sim: Simulation, origin: datetime) -> float:
    return (origin - sim.config.start).total_seconds() % sim.config.sample_step_s


def _runs_as_recorded(sim: Simulation, out: Outcome, origin_s: float) -> str:
    """How many of the record's runs the replay ran alike (start, end, state, idle stretches), up to its
    horizon (a run the record ended after it is compared up to its start)."""

    def runs(outcome: Outcome, offset: float) -> dict[tuple[str, int], tuple[object, ...]]:
        found: dict[tuple[str, int], tuple[object, ...]] = {}
        for k, indices in enumerate(outcome.job_runs):
            for r in indices:
                run = outcome.runs[r]
                end = None if run.end_s is None or run.end_s + offset > out.horizon_s else run.end_s + offset
                found[(outcome.jobs[k].job_id, run.run)] = (
                    None if run.start_s is None else run.start_s + offset, end,
                    run.state if end is not None else None,
                    tuple((a + offset, min(b + offset, out.horizon_s))
                          for a, b in run.idle if a + offset < out.horizon_s))
        return found

    record, replayed = runs(sim.outcome, -origin_s), runs(out, 0.0)
    return f"{sum(1 for k, v in record.items() if replayed.get(k) == v):,} of {len(record):,}"


def _figure(figures: Figures, tier: str, name: str) -> float | None:
    if tier == "all":
        return float(getattr(figures, name))
    found = figures.tier(tier)
    return None if found is None else getattr(found, name)


def _row(label: str, ok: bool | None, worst: float | None, values: Sequence[float | None], same: str | None) -> str:
    shown = " ".join(f"{'-' if v is None else f'{v:,.1f}':>18}" for v in values)
    return (f"{label:45} {'' if ok is None else 'yes' if ok else 'no':>3} "
            f"{'' if worst is None else f'{100 * worst:.1f}%':>7} {shown}  {same or ''}")


if __name__ == "__main__":
    main()
