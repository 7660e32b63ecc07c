"""The replay against a real Slurm 22.05: does it reproduce what the scheduler did, predict a policy change, and
predict plain queueing with preemption really off?

A seeded workload of training-like jobs that checkpoint and restart from their
checkpoints (tests/slurm/replay_scenario.py) is played on the suite's real
Slurm (tests/slurm/slurm_harness.py: one node, 8 GPUs, partition high
(PriorityTier 10) preempts partition low (PriorityTier 1) by requeue), its
jobs submitted without time limits on partitions with MaxTime=UNLIMITED (as
many GPU clusters run: Slurm's backfill can then place no reservation):

  A    the policy in force (PreemptExemptTime 0)
  B    a changed policy (PreemptExemptTime --exempt; optionally a low-partition GraceTime --grace)
  A+t  with --limits: A again, each job submitted with a time limit (--time), so backfill reserves
  C    PreemptType=preempt/none: plain queueing, the partitions' PriorityTier still ordering the queue
  A2   with --again: A played a second time, the same plan and policy: how far the real Slurm is from itself
       (the floor a replay of one play can be held to; jobs that end in the same second branch either way)
  B2   with --again: B played a second time: the changed policy's own spread, so the change A -> B is measured
       twice by two independent pairs of plays (A -> B and A2 -> B2)
  A+t2 with --again and --limits: A+t played a second time

Each play is collected as a user would (`collect slurm`, `import` of the
jobs' checkpoint and progress rows, `analyze`). Then the A play is replayed
under the policy it read from Slurm (target: within 10% of the record on
preemptions, victims, lost GPU-hours and each tier's p50 and p90 first-start
wait), under policy B against the B play (target: the change A -> B within
15%), and under no preemption (the counterfactual's `none` scenario) against
the C play, per tier: p50 and p90 first-start wait, queue GPU-hours, jobs
completed and their median completion time. The C play is also replayed under
its own policy (plain queueing reproduced).

    python benchmarks/bench_replay_real.py                  # 20 training + 8 serving jobs, A, B, C: ~20 min
    python benchmarks/bench_replay_real.py --limits         # and A with time limits: ~27 min on 2 cores
    python benchmarks/bench_replay_real.py --limits --again # and A, B, A+t played twice: ~46 min (7 plays)
    python benchmarks/bench_replay_real.py --low 12 --high 5 --span 90 --exempt 30

Needs root and the Slurm packages tests/run.sh installs. Figures print as
real | replayed (the one replay `analyze` stores: inputs as measured) | range over replays with jittered
inputs (what the figure's interval covers) and whether the real figure lies in it | median of those replays |
error of the replayed figure against the real one.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from statistics import median

# This checkout's code and the suite's Slurm harness.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "slurm"))

from replay_scenario import (  # noqa: E402
    TIERS,
    Named,
    Played,
    collect,
    plan,
    play,
    read_policy,
    real_figures,
    replay_figures,
)
from slurm_harness import CLUSTER, SlurmCluster, tools_missing  # noqa: E402

from preemptlens.analytics.simulator.model import PolicyConfig  # noqa: E402
from preemptlens.analytics.whatif.replay import (  # noqa: E402
    WAIT_FLOOR_S,
    OutcomeParts,
    Variant,
    Window,
    Workload,
    load_workload,
    replay_outcome,
)
from preemptlens.analytics.whatif.settings import TuningSettings  # noqa: E402
from preemptlens.reading.words import significant  # noqa: E402
from preemptlens.warehouse import Warehouse  # noqa: E402

# The figures compared, by name: the ledger's, then per tier.
LEDGER = ("preemptions", "victims", "lost GPU-h")
WAITS = tuple(f"{t} wait {q}" for t in TIERS for q in ("p50", "p90"))
QUEUEING = tuple(f"{t} {f}" for t in (*TIERS, "all") for f in ("wait p50", "wait p90", "queue GPU-h", "completed",
                                                                "completion p50"))


@dataclass
class Replayed:
    """A policy replayed as measured, and its figures' median and range over replays with jittered inputs (whole-
    second times anywhere in their second, the scheduler's latencies within their quartiles)."""

    point: Named
    median: Named
    low: Named
    high: Named


def replayed(workload: Workload, policy: PolicyConfig, draws: int) -> Replayed:
    point = replay_figures(workload, replay_outcome(workload, Variant("as measured", policy)))
    draws_found = [replay_figures(workload, replay_outcome(workload, Variant(f"jitter {k}", policy, jitter=k)))
                   for k in range(1, draws + 1)] or [point]

    def pick(how: Callable[[list[float]], float]) -> Named:
        found: Named = {}
        for name in point:
            values = [v for d in draws_found if (v := d[name]) is not None]
            found[name] = how(values) if values else None
        return found

    return Replayed(point, pick(median), pick(min), pick(max))


def _floor(name: str) -> float:
    """What an error is measured against where the real figure is small: a second of wait (the record's
    resolution), one job completed; none for counts and GPU-hours."""
    if "wait" in name or "completion" in name:
        return WAIT_FLOOR_S
    return 1.0 if name.endswith("completed") else 0.0


def _error(name: str, real: float | None, predicted: float | None, scale: float | None = None) -> float | None:
    if real is None or predicted is None:
        return None
    scale = max(abs(real) if scale is None else scale, _floor(name))
    return abs(predicted - real) / scale if scale else (0.0 if predicted == real else None)


def _percent(err: float | None) -> str:
    return "n/a" if err is None else f"{100 * err:.1f}%"


def table(title: str, names: tuple[str, ...], real: Named, rep: Replayed, limit: float,
          again: Named | None = None) -> dict[str, float | None]:
    """Real against replayed; with `again` (the same plan played a second time on the real Slurm), also the
    real play against its repeat: the spread of the scheduler itself."""
    print(f"\n{title}")
    print(f"   {'figure':24} {'real':>9} {'replayed':>9}  {'range over jittered':22} {'real in it':>10} "
          f"{'median':>9} {'error':>7}" + (f"      {'real again':>10} {'real vs real':>12}" if again is not None
                                          else ""))
    errors = {}
    for name in names:
        r, p, m = real.get(name), rep.point.get(name), rep.median.get(name)
        low, high = rep.low.get(name), rep.high.get(name)
        err = _error(name, r, p)
        errors[name] = err
        mark = "" if err is None else ("ok" if err <= limit else "MISS")
        shown = f"{significant(low)} to {significant(high)}" if low is not None else ""
        inside = "" if None in (r, low, high) else ("yes" if low <= r <= high else "no")  # type: ignore[operator]
        repeat = ""
        if again is not None:
            repeat = f" {significant(again.get(name)):>10} {_percent(_error(name, r, again.get(name))):>12}"
        print(f"   {name:24} {significant(r):>9} {significant(p):>9}  {shown:22} {inside:>10} {significant(m):>9} "
              f"{_percent(err):>7} {mark:4}{repeat}")
    return errors


def in_range(names: tuple[str, ...], real: Named, rep: Replayed) -> str:
    """How many real figures lie in the range of the replays with jittered inputs (what an interval covers)."""
    known = [n for n in names if None not in (real.get(n), rep.low.get(n), rep.high.get(n))]
    inside = [n for n in known if rep.low[n] <= real[n] <= rep.high[n]]  # type: ignore[operator]
    return f"; real in the jittered range on {len(inside)} of {len(known)}"


def spread(names: tuple[str, ...], real: Named, again: Named) -> dict[str, float | None]:
    return {name: _error(name, real.get(name), again.get(name)) for name in names}


def between(names: tuple[str, ...], real: Named, again: Named, replayed_point: Named) -> str:
    """On how many figures the replay lies between two real plays of one plan (both ends included)."""
    known = [n for n in names if None not in (real.get(n), again.get(n), replayed_point.get(n))]
    inside = [n for n in known if min(real[n], again[n]) <= replayed_point[n] <= max(real[n], again[n])]  # type: ignore[type-var,operator]
    return f"{len(inside)} of {len(known)}" + (f" ({', '.join(inside)})" if inside else "")


def change_table(names: tuple[str, ...], real_a: Named, real_b: Named, rep_a: Named, rep_b: Named, limit: float,
                 pair: str = "A -> B") -> dict[str, float | None]:
    """The change A -> B, real (two plays, `pair` names them) against predicted (the A play replayed under A and
    under B): its error against the real change, or against a tenth of the real B figure where the change is
    smaller."""
    print(f"\nthe change A -> B: real ({pair}) against predicted (the A play replayed under A and under B), "
          f"target within {100 * limit:.0f}% of the real change (of a tenth of the real B figure where the change "
          "is smaller)")
    print(f"   {'figure':24} {'real A -> B':>22} {'predicted A -> B':>22} {'error':>7}")
    errors: dict[str, float | None] = {}
    for name in names:
        ra, rb, pa, pb = real_a.get(name), real_b.get(name), rep_a.get(name), rep_b.get(name)
        if ra is None or rb is None or pa is None or pb is None:
            errors[name] = None
            print(f"   {name:24} {'unknown':>22}")
            continue
        err = _error(name, rb - ra, pb - pa, max(abs(rb - ra), 0.1 * abs(rb)))
        errors[name] = err
        print(f"   {name:24} {significant(ra) + ' -> ' + significant(rb):>22} "
              f"{significant(pa) + ' -> ' + significant(pb):>22} "
              f"{'n/a' if err is None else f'{100 * err:.1f}%':>7} "
              f"{'' if err is None else 'ok' if err <= limit else 'MISS'}")
    return errors


def pairs(wh: Warehouse, workload: Workload, window: Window) -> tuple[int, int, int]:
    """(real victim/preemptor pairs, replayed pairs, pairs in both)."""
    out = replay_outcome(workload, Variant("actual", workload.actual.policy))
    replayed_pairs = {(out.jobs[p.victim].job_id, out.jobs[p.preemptor].job_id) for p in out.preemptions()}
    real = set(wh.query(
        "SELECT l.victim_job_id, l.preemptor_job_id FROM preemption_ledger AS l JOIN jobs AS j "
        "ON j.cluster = l.cluster AND j.job_id = l.victim_job_id WHERE l.cluster = $c AND j.submit_time >= $t0 "
        "AND j.submit_time < $t1", {"c": window.cluster, "t0": window.start, "t1": window.end}).rows())
    return len(real), len(replayed_pairs), len(real & replayed_pairs)


def each_preemption(wh: Warehouse, workload: Workload, window: Window) -> None:
    """Every preemption of the play, real (the ledger's row) beside replayed (counted as the ledger counts it,
    `OutcomeParts`), matched by victim job and run: where the lost GPU-hours differ, which term moves (the run's
    start, its last checkpoint, the preemption's moment, the warm-up counted)."""
    t0 = window.start.timestamp()
    real = {(v, r): row for v, r, *row in wh.query(
        "SELECT l.victim_job_id, l.victim_run, l.victim_gpus, epoch(l.run_start), epoch(l.last_checkpoint_time), "
        "epoch(l.time), l.lost_s, l.lost_gpu_s, l.warmup_s FROM preemption_ledger AS l JOIN jobs AS j "
        "ON j.cluster = l.cluster AND j.job_id = l.victim_job_id WHERE l.cluster = $c AND j.submit_time >= $t0 "
        "AND j.submit_time < $t1 AND l.time < $t1", {"c": window.cluster, "t0": window.start, "t1": window.end}
    ).rows()}
    out = replay_outcome(workload, Variant("actual", workload.actual.policy))
    # OutcomeParts keeps the outcome's preemptions inside the window in their order, stably by job.
    truths = sorted((p for p in out.preemptions() if p.time_s < out.horizon_s), key=lambda p: p.victim)
    counted = OutcomeParts.of(out, workload.resolution_s).preemptions
    replayed = {(out.jobs[p.victim].job_id, p.victim_run): (p, lost, warm) for p, (_, lost, warm, *_) in
                zip(truths, counted, strict=True)}

    def at(t: float | None, base: float = t0) -> str:
        return f"{'-':>8}" if t is None else f"{t - base:8.2f}"

    print("\n   each preemption, real (the ledger) | replayed (as the ledger counts it); times in s from the window's "
          "start; lost s, its GPU-s and the warm-up s counted")
    print(f"   {'victim':>8} {'run':>3} {'GPUs':>4} | {'start':>8} {'ckpt':>8} {'preempt':>8} {'lost':>6} {'GPU-s':>7} "
          f"{'warm-up':>7} | {'start':>8} {'ckpt':>8} {'preempt':>8} {'lost':>6} {'GPU-s':>7} {'warm-up':>7} | "
          f"{'GPU-s replayed - real':>21}")
    both = sorted(set(real) | set(replayed), key=lambda k: (real[k][3] if k in real else replayed[k][0].time_s + t0,
                                                            k))
    total_real = total_replayed = 0.0
    for key in both:
        left = right = f"{'(none)':>55}"
        gpus = real_gpu_s = replayed_gpu_s = None
        if key in real:
            gpus, start, checkpoint, when, lost, real_gpu_s, warm = real[key]
            left = (f"{at(start)} {at(checkpoint)} {at(when)} {lost:6.2f} {real_gpu_s:7.2f} "
                    f"{'-' if warm is None else f'{warm:.2f}':>7}")
            total_real += real_gpu_s
        if key in replayed:
            p, replayed_gpu_s, warm_gpu_s = replayed[key]
            gpus = p.gpus
            right = (f"{at(p.run_start_s, 0.0)} {at(p.last_checkpoint_s, 0.0)} {at(p.time_s, 0.0)} "
                     f"{replayed_gpu_s / p.gpus:6.2f} {replayed_gpu_s:7.2f} {warm_gpu_s / p.gpus:7.2f}")
            total_replayed += replayed_gpu_s
        diff = "" if real_gpu_s is None or replayed_gpu_s is None else f"{replayed_gpu_s - real_gpu_s:+21.2f}"
        print(f"   {key[0]:>8} {key[1]:>3} {gpus:>4} | {left} | {right} | {diff}")
    print(f"   lost GPU-s: real {total_real:.1f}, replayed {total_replayed:.1f}")


def _verdict(errors: Mapping[str, float | None], limit: float,
             floor: Mapping[str, float | None] | None = None) -> str:
    """How many figures are within the target; with the real Slurm's own spread (`floor`), also how many of the
    misses are within what the same plan played twice differs by."""
    known = [e for e in errors.values() if e is not None]
    missed = [n for n, e in errors.items() if e is not None and e > limit]
    text = f"{len(known) - len(missed)} of {len(known)} figures within {100 * limit:.0f}%"
    if missed:
        text += f"; missed: {', '.join(missed)}"
    if floor is not None and missed:
        inside = [n for n in missed if (f := floor.get(n)) is not None and errors[n] <= f]  # type: ignore[operator]
        text += (f"; of the misses, {len(inside)} within the real Slurm's own spread (the same plan played twice)"
                 + (f": {', '.join(inside)}" if inside else ""))
    return text


def analyse(wh: Warehouse, windows: dict[str, Window], exempt: int, grace: int, draws: int) -> bool:
    """Every comparison the plays allow; whether each is within its target."""
    settings = TuningSettings(processes=0)
    started = time.monotonic()
    closing: list[str] = []
    ok = True
    workload = load_workload(wh, windows["A"], settings)
    print("\npolicy in force during A, as the replay reads it:")
    print("   " + workload.actual.describe())
    for note in workload.notes[:5]:
        print(f"   {note}")
    actual = workload.actual.policy
    rep_a = replayed(workload, actual, draws)
    real_a = real_figures(wh, windows["A"])
    again = real_figures(wh, windows["A2"]) if "A2" in windows else None
    errors = table("(a) reproduction: the A play replayed under the policy in force (target within 10%)",
                   (*LEDGER, *WAITS), real_a, rep_a, 0.10, again)
    floor = spread((*LEDGER, *WAITS), real_a, again) if again is not None else None
    closing.append("(a) reproduction (no time limits): " + _verdict(errors, 0.10, floor)
                   + in_range((*LEDGER, *WAITS), real_a, rep_a))
    if floor is not None:
        closing.append("(a0) the real Slurm against itself (A played twice): " + _verdict(floor, 0.10))
    ok &= all(e is None or e <= 0.10 for e in errors.values())
    real_n, replayed_n, both = pairs(wh, workload, windows["A"])
    print(f"   victim/preemptor pairs: {real_n} real, {replayed_n} replayed, {both} in both")
    each_preemption(wh, workload, windows["A"])
    if "B" in windows:
        policy_b = replace(actual, min_run_s=float(exempt))
        if grace:
            policy_b = replace(policy_b, grace_by_tier={**actual.grace_by_tier, "low": float(grace)})
        rep_b = replayed(workload, policy_b, draws)
        real_b = real_figures(wh, windows["B"])
        real_b2 = real_figures(wh, windows["B2"]) if "B2" in windows else None
        what = f"PreemptExemptTime {exempt} s" + (f", GraceTime {grace} s" if grace else "")
        table(f"(b) prediction: the A play replayed under B ({what}) against the B play" +
              (" (and B played again, B2)" if real_b2 is not None else ""), (*LEDGER, *WAITS),
              real_b, rep_b, 0.15, real_b2)
        b_floor = spread((*LEDGER, *WAITS), real_b, real_b2) if real_b2 is not None else None
        errors_b2 = None
        if real_b2 is not None:
            errors_b2 = table("(b2) the same prediction against the B2 play (target within 15%)", (*LEDGER, *WAITS),
                              real_b2, rep_b, 0.15)
        b_range = in_range((*LEDGER, *WAITS), real_b, rep_b)
        errors = change_table((*LEDGER, *WAITS), real_a, real_b, rep_a.point, rep_b.point, 0.15)
        change_floor = None
        if again is not None:
            # The change measured by a second, independent pair of plays (A2 -> B2; A2 -> B when B was played
            # once, which leaves B's own spread out): how far two real measures of one change differ.
            again_b = real_b2 if real_b2 is not None else real_b
            change_floor = {name: _error(name, real_b[name] - real_a[name], again_b[name] - again[name],  # type: ignore[operator]
                                         max(abs(real_b[name] - real_a[name]), 0.1 * abs(real_b[name])))  # type: ignore[operator]
                            if None not in (real_a.get(name), real_b.get(name), again.get(name),
                                            again_b.get(name)) else None
                            for name in (*LEDGER, *WAITS)}
        closing.append(f"(b) the change A -> B ({what}): " + _verdict(errors, 0.15, change_floor) + b_range
                       + " (the B figures)")
        if real_b2 is not None:
            closing.append(f"(b) the B play replayed against B2 ({what} played again): "
                           + _verdict(errors_b2, 0.15, b_floor) + in_range((*LEDGER, *WAITS), real_b2, rep_b)
                           + "; replayed within the two real plays' span on " + between((*LEDGER, *WAITS), real_b,
                                                                                       real_b2, rep_b.point))
            closing.append("(b0) the real Slurm against itself under B (B played twice): " + _verdict(b_floor, 0.15))
        if change_floor is not None:
            closing.append("(b0) the real change A -> B against " + ("A2 -> B2" if real_b2 is not None else
                                                                      "A2 -> B (B played once: its spread unmeasured)")
                           + ": " + _verdict(change_floor, 0.15))
            if real_b2 is not None:
                second = change_table((*LEDGER, *WAITS), again, real_b2, rep_a.point, rep_b.point, 0.15,
                                      "A2 -> B2, the second pair of plays")
                closing.append(f"(b) the change A2 -> B2 ({what}): " + _verdict(second, 0.15))
        ok &= all(e is None or e <= 0.15 for e in errors.values())
    if "A+t" in windows:
        limited = load_workload(wh, windows["A+t"], settings)
        real_t, rep_t = real_figures(wh, windows["A+t"]), replayed(limited, limited.actual.policy, draws)
        real_t2 = real_figures(wh, windows["A+t2"]) if "A+t2" in windows else None
        errors = table("(a') reproduction of the play with time limits (backfill reserves from them; target "
                       "within 10%)", (*LEDGER, *WAITS), real_t, rep_t, 0.10, real_t2)
        t_floor = spread((*LEDGER, *WAITS), real_t, real_t2) if real_t2 is not None else None
        closing.append("(a') reproduction with time limits: " + _verdict(errors, 0.10, t_floor)
                       + in_range((*LEDGER, *WAITS), real_t, rep_t))
        if real_t2 is not None and t_floor is not None:
            closing.append("(a'0) the real Slurm against itself with time limits (A+t played twice): "
                           + _verdict(t_floor, 0.10) + "; replayed within the two real plays' span on "
                           + between((*LEDGER, *WAITS), real_t, real_t2, rep_t.point))
        ok &= all(e is None or e <= 0.10 for e in errors.values())
    if "C" in windows:
        real_c = real_figures(wh, windows["C"])
        none = replayed(workload, replace(actual, enabled=False), draws)
        errors = table("(c) the counterfactual `none` (the A play replayed without preemption) against the play "
                       "with PreemptType=preempt/none (target within 15%)", QUEUEING, real_c, none, 0.15)
        closing.append("(c) counterfactual none against preemption really off: " + _verdict(errors, 0.15)
                       + in_range(QUEUEING, real_c, none))
        ok &= all(e is None or e <= 0.15 for e in errors.values())
        plain = load_workload(wh, windows["C"], settings)
        rep_c = replayed(plain, plain.actual.policy, draws)
        errors = table("(c') plain queueing reproduced: the C play replayed under its own policy (target within "
                       "10%)", QUEUEING, real_c, rep_c, 0.10)
        closing.append("(c') the no-preemption play reproduced: " + _verdict(errors, 0.10)
                       + in_range(QUEUEING, real_c, rep_c))
        high_saved_real = real_c["high queue GPU-h"] - real_a["high queue GPU-h"]  # type: ignore[operator]
        high_saved_pred = none.point["high queue GPU-h"] - rep_a.point["high queue GPU-h"]  # type: ignore[operator]
        low_added_real = real_a["low queue GPU-h"] - real_c["low queue GPU-h"]  # type: ignore[operator]
        low_added_pred = rep_a.point["low queue GPU-h"] - none.point["low queue GPU-h"]  # type: ignore[operator]
        print(f"\n   high-tier queue GPU-h saved by preemption: real {significant(high_saved_real)}, predicted "
              f"{significant(high_saved_pred)}; low-tier queue GPU-h added: real {significant(low_added_real)}, "
              f"predicted {significant(low_added_pred)}")
    print(f"\nreplays {time.monotonic() - started:.1f} s ({draws} jittered per policy)")
    print("\nclosing note, predicted against real:")
    for line in closing:
        print(f"   {line}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--low", type=int, default=20, help="training jobs (partition low)")
    parser.add_argument("--high", type=int, default=8, help="serving jobs (partition high)")
    parser.add_argument("--span", type=float, default=200.0, help="seconds over which the jobs are submitted")
    parser.add_argument("--exempt", type=int, default=60, help="policy B's PreemptExemptTime (s)")
    parser.add_argument("--grace", type=int, default=0, help="policy B's low-partition GraceTime (s)")
    parser.add_argument("--limits", action="store_true", help="also play A with each job's time limit")
    parser.add_argument("--no-change", action="store_true", help="skip the play under policy B")
    parser.add_argument("--no-off", action="store_true", help="skip the play with PreemptType=preempt/none")
    parser.add_argument("--again", action="store_true", help="play A, B and A+t a second time: the real Slurm's "
                        "own spread")
    parser.add_argument("--draws", type=int, default=12, help="replays with jittered inputs per policy")
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
            windows[tag] = Window(CLUSTER, datetime.fromisoformat(begin), datetime.fromisoformat(end))
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
    # (tag, preemption mode, PreemptExemptTime, low GraceTime, time limits)
    order = [("A", "partition_prio", 0, 0, False)]
    if args.again:
        order.append(("A2", "partition_prio", 0, 0, False))
    if not args.no_change:
        order.append(("B", "partition_prio", args.exempt, args.grace, False))
        if args.again:
            order.append(("B2", "partition_prio", args.exempt, args.grace, False))
    if args.limits:
        order.append(("A+t", "partition_prio", 0, 0, True))
        if args.again:
            order.append(("A+t2", "partition_prio", 0, 0, True))
    if not args.no_off:
        order.append(("C", "none", 0, 0, False))
    try:
        cluster.start()
        wh = Warehouse(path)
        plays: dict[str, Played] = {}
        for tag, mode, exempt, grace, limits in order:
            cluster.use(mode)
            if (cluster.exempt_s, cluster.low_grace_s) != (exempt, grace):
                cluster.set_policy(exempt_s=exempt, low_grace_s=grace)
            read_policy(cluster, wh)
            print(f"playing {tag}: {len(jobs)} jobs over {args.span:g} s, preempt/{mode}, PreemptExemptTime "
                  f"{exempt} s{', time limits' if limits else ''} ...", flush=True)
            plays[tag] = play(cluster, jobs, tag.replace("+", "-"), limits=limits)
            collect(cluster, wh, plays[tag].started, [plays[tag].dir])
            print(f"   {tag}: {plays[tag].started.isoformat()} to {plays[tag].ended.isoformat()} "
                  f"({(time.monotonic() - began) / 60:.1f} min so far)", flush=True)
        print(f"\nplays {(time.monotonic() - began) / 60:.1f} min on the real Slurm; again with --analyse {path} "
              "--windows " + ",".join(f"{tag}={p.started.isoformat()}/{p.ended.isoformat()}"
                                      for tag, p in plays.items()))
        ok = analyse(wh, {tag: Window(CLUSTER, p.started, p.ended) for tag, p in plays.items()}, args.exempt,
                     args.grace, args.draws)
        wh.close()
        print(f"\nwhole benchmark {(time.monotonic() - began) / 60:.1f} min")
        return 0 if ok else 1
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
