"""The replay against a real Slurm 22.05: does it reproduce what the scheduler did, and predict a policy change?

A seeded workload of training-like jobs that checkpoint and restart from their
checkpoints (tests/slurm/replay_scenario.py) is played on the suite's real
Slurm (tests/slurm/slurm_harness.py: one node, 8 GPUs, partition high preempts
partition low by requeue) under policy A (PreemptExemptTime 0), again under A,
and under policy B (a minimum run time, PreemptExemptTime --exempt; optionally
with a low-partition GraceTime --grace). Each play is collected as a user would
(`collect slurm`, `import` of the jobs' checkpoint and progress rows,
`analyze`). Then the replay of the first play is compared with it (target:
within 10% on preemptions, victims, lost GPU-hours and high-tier median wait)
and, replayed under policy B, with the B play (target: the change A -> B within
15%), and the second A play shows how far one history is from another.

    python benchmarks/bench_replay_real.py                 # 24 training + 10 serving jobs, about 20 minutes
    python benchmarks/bench_replay_real.py --low 12 --high 5 --span 90 --exempt 30

Needs root and the Slurm packages tests/run.sh installs. Figures print as
real | replayed [range over replays with jittered inputs] | error.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

# This checkout's code and the suite's Slurm harness.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "slurm"))

from replay_scenario import Played, collect, plan, play, read_policy  # noqa: E402
from slurm_harness import SlurmCluster, tools_missing  # noqa: E402

from preemptlens.analytics.whatif.replay import (  # noqa: E402
    WAIT_FLOOR_S,
    Figures,
    Interval,
    Variant,
    Window,
    Workload,
    interval,
    load_workload,
    observed_figures,
    run_variant,
)
from preemptlens.analytics.whatif.tuning import TuningSettings  # noqa: E402
from preemptlens.reading.words import significant  # noqa: E402
from preemptlens.warehouse import Warehouse  # noqa: E402

FIGURES = (("preemptions", "preemptions"), ("victims", "victim_jobs"), ("lost GPU-hours", "lost_gpu_h"),
           ("high-tier median wait (s)", "high_wait_median_s"))


@dataclass
class Result:
    """One comparison's errors, by figure (None when the real figure is unknown)."""

    errors: dict[str, float | None]


def _error(real: float | None, predicted: float | None, field: str) -> float | None:
    if real is None or predicted is None:
        return None
    scale = max(abs(real), WAIT_FLOOR_S if field == "high_wait_median_s" else 0.0)
    return abs(predicted - real) / scale if scale else (0.0 if predicted == real else None)


def _central(point: Figures, spread: Interval | None) -> Figures:
    return spread.median if spread is not None and spread.median is not None else point


def window_of(p: Played) -> Window:
    return Window("plens", p.started, p.ended)


def table(title: str, real: Figures, predicted: Figures, spread: Interval | None, limit: float) -> Result:
    """Real against replayed: with an interval, the replayed figure is its median over the jittered replays (the
    estimate that takes the inputs' measurement error into account), the replay of the inputs as measured
    (whole-second times at the middle of their second) beside it."""
    print(f"\n{title}")
    columns = ("replayed", "as measured", "range over jittered replays") if spread else ("other play", "", "")
    print(f"   {'figure':28} {'real':>10} {columns[0]:>10} {columns[1]:>12}  {columns[2]:32} {'error':>7}")
    errors = {}
    for label, field in FIGURES:
        r = getattr(real, field)
        point = getattr(predicted, field)
        p = getattr(spread.median, field) if spread is not None and spread.median is not None else point
        low, high = spread.of(field) if spread is not None else (None, None)
        shown = f"{significant(low)} to {significant(high)}" if low is not None else ""
        err = _error(r, p, field)
        errors[field] = err
        mark = "" if err is None else ("ok" if err <= limit else "MISS")
        aside = significant(point) if spread is not None else ""
        print(f"   {label:28} {significant(r):>10} {significant(p):>10} {aside:>12}  {shown:32} "
              f"{'n/a' if err is None else f'{100 * err:.1f}%':>7} {mark}")
    return Result(errors)


def change_table(real_a: Figures, real_b: Figures, rep_a: Figures, rep_b: Figures, limit: float) -> Result:
    """The change A -> B, real (two plays) against predicted (the replays' medians under A and under B)."""
    print(f"\nthe change A -> B: real (two plays) against predicted (the A play replayed under A and under B), "
          f"target within {100 * limit:.0f}% of the real change (of the real B figure where the change is under "
          "a tenth of it)")
    print(f"   {'figure':28} {'real A -> B':>22} {'predicted A -> B':>22} {'error':>7}")
    errors = {}
    for label, field in FIGURES:
        ra, rb, pa, pb = (getattr(f, field) for f in (real_a, real_b, rep_a, rep_b))
        if None in (ra, rb, pa, pb):
            errors[field] = None
            print(f"   {label:28} {'unknown':>22}")
            continue
        real_change, predicted_change = rb - ra, pb - pa
        scale = max(abs(real_change), 0.1 * abs(rb), WAIT_FLOOR_S if field == "high_wait_median_s" else 0.0)
        err = abs(predicted_change - real_change) / scale if scale else 0.0
        errors[field] = err
        real_text = f"{significant(ra)} -> {significant(rb)}"
        pred_text = f"{significant(pa)} -> {significant(pb)}"
        print(f"   {label:28} {real_text:>22} {pred_text:>22} {100 * err:6.1f}% {'ok' if err <= limit else 'MISS'}")
    return Result(errors)


def pairs(wh: Warehouse, workload: Workload, window: Window) -> tuple[int, int, int]:
    """(real victim/preemptor pairs, replayed pairs, pairs in both)."""
    from preemptlens.analytics.whatif.replay import _replay

    out = _replay(workload, Variant("actual", workload.actual.policy))
    replayed = {(out.jobs[p.victim].job_id, out.jobs[p.preemptor].job_id) for p in out.preemptions()}
    real = set(wh.query(
        "SELECT l.victim_job_id, l.preemptor_job_id FROM preemption_ledger AS l JOIN jobs AS j "
        "ON j.cluster = l.cluster AND j.job_id = l.victim_job_id WHERE l.cluster = $c AND j.submit_time >= $t0 "
        "AND j.submit_time < $t1", {"c": window.cluster, "t0": window.start, "t1": window.end}).rows())
    return len(real), len(replayed), len(real & replayed)


def analyse(wh: Warehouse, windows: dict[str, Window], exempt: int, grace: int, draws: int) -> bool:
    """Replay the A window under A and under B, and print every comparison; whether each is within target."""
    settings = TuningSettings(processes=0)
    window = windows["A"]
    workload = load_workload(wh, window, settings)
    print("\npolicy in force during A, as the replay reads it:")
    print("   " + workload.actual.describe())
    for note in workload.notes[:4]:
        print(f"   {note}")
    actual = Variant("A", workload.actual.policy)
    policy_b = replace(workload.actual.policy, min_run_s=float(exempt))
    if grace:
        policy_b = replace(policy_b, grace_by_tier={**workload.actual.policy.grace_by_tier, "low": float(grace)})
    changed = Variant("B", policy_b)
    started = time.monotonic()
    rep_a, rep_b = run_variant(workload, actual), run_variant(workload, changed)
    spread_a = interval(workload, actual, draws)
    spread_b = interval(workload, changed, draws)
    replay_s = time.monotonic() - started
    real_a = observed_figures(wh, window)
    real_b = observed_figures(wh, windows["B"])
    results = [table("reproduction: the A play replayed under A (target within 10%)", real_a, rep_a, spread_a,
                     0.10)]
    real_n, replayed_n, both = pairs(wh, workload, window)
    print(f"   victim/preemptor pairs: {real_n} real, {replayed_n} replayed, {both} in both")
    if "A again" in windows:
        again = observed_figures(wh, windows["A again"])
        table("two real histories of one workload under A: the second against the first (how far the "
              "scheduler is from itself)", real_a, again, None, 0.10)
    results.append(table(f"prediction: the A play replayed under B (PreemptExemptTime {exempt} s"
                         + (f", GraceTime {grace} s" if grace else "") + ") against the B play",
                         real_b, rep_b, spread_b, 0.15))
    results.append(change_table(real_a, real_b, _central(rep_a, spread_a), _central(rep_b, spread_b), 0.15))
    print(f"\nreplays {replay_s:.1f} s (2 + {2 * draws} jittered)")
    return all(e is None or e <= limit for r, limit in zip(results, (0.10, 0.15, 0.15), strict=True)
               for e in r.errors.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--low", type=int, default=24, help="training jobs (partition low)")
    parser.add_argument("--high", type=int, default=10, help="serving jobs (partition high)")
    parser.add_argument("--span", type=float, default=240.0, help="seconds over which the jobs are submitted")
    parser.add_argument("--exempt", type=int, default=60, help="policy B's PreemptExemptTime (s)")
    parser.add_argument("--grace", type=int, default=0, help="policy B's low-partition GraceTime (s)")
    parser.add_argument("--no-repeat", action="store_true", help="skip the second play under policy A")
    parser.add_argument("--draws", type=int, default=12, help="replays with jittered inputs per interval")
    parser.add_argument("--keep", help="keep the warehouse at this path")
    parser.add_argument("--analyse", metavar="WAREHOUSE", help="only compare again the plays a kept warehouse "
                        "holds (their windows from --windows)")
    parser.add_argument("--windows", help="with --analyse: TAG=START/END,... as the plays printed them")
    args = parser.parse_args()
    if args.analyse:
        windows = {}
        for item in (args.windows or "").split(","):
            tag, _, span = item.partition("=")
            begin, _, end = span.partition("/")
            windows[tag.replace("_", " ")] = Window("plens", datetime.fromisoformat(begin), datetime.fromisoformat(end))
        with Warehouse(Path(args.analyse)) as wh:
            return 0 if analyse(wh, windows, args.exempt, args.grace, args.draws) else 1
    missing = tools_missing()
    if missing:
        print(f"needs the Slurm packages ({', '.join(missing)}): run tests/run.sh as root first")
        return 2
    jobs = plan(args.seed, args.low, args.high, args.span)
    root = Path(tempfile.mkdtemp(prefix="plens-bench-replay-"))
    path = Path(args.keep) if args.keep else root / "w.duckdb"
    cluster = SlurmCluster(root / "slurm")
    began = time.monotonic()
    try:
        cluster.start()
        wh = Warehouse(path)
        read_policy(cluster, wh)
        plays: dict[str, Played] = {}
        order = ["A", *([] if args.no_repeat else ["A again"]), "B"]
        for tag in order:
            if tag == "B":
                cluster.set_policy(exempt_s=args.exempt, low_grace_s=args.grace)
                read_policy(cluster, wh)
            print(f"playing {tag}: {len(jobs)} jobs over {args.span:g} s ...", flush=True)
            plays[tag] = play(cluster, jobs, tag.replace(" ", "-"))
            collect(cluster, wh, plays[tag].started, [plays[tag].dir])
            print(f"   {tag}: {plays[tag].started.isoformat()} to {plays[tag].ended.isoformat()}", flush=True)
        print(f"\nplays {(time.monotonic() - began) / 60:.1f} min on the real Slurm; again with --analyse {path} "
              "--windows " + ",".join(f"{tag.replace(' ', '_')}={p.started.isoformat()}/{p.ended.isoformat()}"
                                      for tag, p in plays.items()))
        ok = analyse(wh, {tag: window_of(p) for tag, p in plays.items()}, args.exempt, args.grace, args.draws)
        wh.close()
        return 0 if ok else 1
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
