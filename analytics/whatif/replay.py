"""What-if replay: the recorded workload re-run through the simulator's scheduler.

The warehouse's raw tables and views (never the simulator's truth tables) give
one `JobSpec` per job submitted in the window; the policy in force comes from
the `[tuning]` settings or is inferred from the ledger. `simulate_jobs` then
replays them under that policy and under alternatives. A what-if is only worth
as much as the replay's reproduction of the past, so `validate` compares the
replay under the actual policy with the observed figures and every caller
reports that error next to its results.

What is measured and what is approximated (docs/tuning.md has the full list):
- work needed: `jobs.work_s` where the source gives it (a job that stopped in
  its only run without finishing it stops again after the work it did, and is
  planned for the whole work, as the scheduler planned it; one that stopped
  later is capped at the work done), else the useful run time: the runs'
  time minus the progress lost at preemptions, the measured warm-ups and the
  idle-hoarding stretches. A job still running at the end of the data needs at
  least the window again, so it never completes inside the replay.
- checkpoint interval: the median spacing of its checkpoint rows within a run
  (and a first run's first one after its start), leaving out a preempted run's
  last checkpoint inside the grace time, else the declared interval.
- warm-up: measured from the progress rows after its restarts, or from a short
  completed restart's run time less the work it had left; else the median of
  all measured warm-ups.
- final checkpoint at the preemption signal: seen when a preempted run's last
  checkpoint falls inside the grace time off the job's cadence; a run that
  finished on a preemptor's hosts within the grace time before it started was
  signalled and did not save; jobs neither preempted nor signalled get it with
  the observed share (chosen by a hash of the job id, so replays are
  deterministic), and the median observed save time.
- idle hoarding: the median complete idle stretch, and the shortest active span
  before a stretch (the engine idles on the sample grid after it).
A guessed value only matters for a job the replay preempts or restarts where
the past did not; with every measured input right, the replay under the actual
policy follows the past exactly and never uses a guess.
- jobs submitted before the window are not replayed (a cold start), and jobs
  that do not fit the simulator's cluster model (unknown pool, more GPUs than
  the pool, multi-node sizes that are not whole nodes) are left out and counted.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from operator import itemgetter
from statistics import median
from types import MappingProxyType
from typing import Any

from preemptlens.analytics.simulator.engine import Outcome, _Scheduler, paused_gc, simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec
from preemptlens.analytics.whatif.policy_in_force import PolicyBasis, policy_in_force
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.errors import SchemaError
from preemptlens.reading.words import duration, significant
from preemptlens.warehouse import Warehouse, query_sql

HIGH_TIERS = ("critical", "high")
_WEEK_S = 7 * 86400.0
# Terminal states in which a job stopped without finishing its work.
_STOPPED = ("failed", "cancelled", "timeout", "node_fail")
# Wait errors are relative to the real wait, but a miss below a second is no miss: sacct records whole seconds.
WAIT_FLOOR_S = 1.0
# Fewer days than this are not extrapolated to a week: a figure per week says so instead.
MIN_DAYS_PER_WEEK = 1.0


@dataclass(frozen=True)
class Figures:
    """The figures a replay must reproduce, and what the suggestions change."""

    preemptions: int
    lost_gpu_h: float
    high_wait_median_s: float | None
    victim_jobs: int
    weeks: float
    # Lost progress plus the restarts' warm-up (docs/figures.md, work thrown away); None when unknown.
    thrown_away_gpu_h: float | None = None
    high_wait_p90_s: float | None = None
    # Victims whose warm-up the workload assumed (the median of the measured ones) instead of measuring it.
    warmup_assumed_victims: int = 0

    @property
    def victims_per_week(self) -> float | None:
        """None when the window is shorter than MIN_DAYS_PER_WEEK: too short to extrapolate (`per_week_note`)."""
        return self.victim_jobs / self.weeks if self.weeks * 7 >= MIN_DAYS_PER_WEEK else None

    @property
    def preemptions_per_week(self) -> float | None:
        return self.preemptions / self.weeks if self.weeks * 7 >= MIN_DAYS_PER_WEEK else None

    @property
    def per_week_note(self) -> str:
        """Why a figure per week is missing: the window is too short to extrapolate from."""
        return f"the window of {duration(self.weeks * _WEEK_S)} is too short to extrapolate to a week"


@dataclass(frozen=True)
class Workload:
    window: Window
    pools: tuple[PoolSpec, ...]
    jobs: tuple[JobSpec, ...]
    actual: PolicyBasis
    skipped: Mapping[str, int]
    notes: tuple[str, ...]
    # Measured final-checkpoint save times (job id -> seconds) and the share of
    # preempted checkpointing jobs that saved one.
    saves: Mapping[str, float] = field(default_factory=dict)
    final_share: float = 0.0
    # Jobs whose warm-up after a restart was measured; None: every job's warm-up is given (a synthetic workload).
    warmup_measured: frozenset[str] | None = None
    # The recorded times' resolution (1 s: sacct's whole seconds; 0: exact): replayed waits are read as the
    # source records them.
    resolution_s: float = 0.0

    @property
    def horizon_s(self) -> float:
        return self.window.seconds


@dataclass(frozen=True)
class Validation:
    observed: Figures
    replayed: Figures
    tolerance: float

    @property
    def errors(self) -> dict[str, float | None]:
        """Relative error of each figure (None when the observed figure is zero or missing)."""
        pairs = {
            "preemptions": (self.observed.preemptions, self.replayed.preemptions),
            "victims": (self.observed.victim_jobs, self.replayed.victim_jobs),
            "lost_gpu_h": (self.observed.lost_gpu_h, self.replayed.lost_gpu_h),
            "high_wait_median_s": (self.observed.high_wait_median_s, self.replayed.high_wait_median_s),
        }
        return {k: _relative(o, r, WAIT_FLOOR_S if k == "high_wait_median_s" else 0.0) for k, (o, r) in pairs.items()}

    @property
    def ok(self) -> bool:
        return all(e is None or e <= self.tolerance for e in self.errors.values())

    def describe(self) -> str:
        parts = []
        observed, replayed = self.observed, self.replayed
        values = {"preemptions": (observed.preemptions, replayed.preemptions),
                  "victims": (observed.victim_jobs, replayed.victim_jobs),
                  "lost_gpu_h": (observed.lost_gpu_h, replayed.lost_gpu_h),
                  "high_wait_median_s": (observed.high_wait_median_s, replayed.high_wait_median_s)}
        for name, err in self.errors.items():
            shown = "n/a" if err is None else f"{100 * err:.1f}%"
            real, again = values[name]
            parts.append(f"{name} {shown} ({significant(real)} real, {significant(again)} replayed)")
        limit = f"{100 * self.tolerance:.0f}%"
        verdict = "reproduces the past" if self.ok else f"does NOT reproduce the past within {limit}"
        return f"replay error under the actual policy: {', '.join(parts)} ({verdict})"


def _relative(observed: float | None, replayed: float | None, floor: float) -> float | None:
    if observed is None or replayed is None:
        return None
    scale = max(abs(observed), floor)
    if scale == 0:
        return 0.0 if replayed == 0 else None
    return abs(replayed - observed) / scale


# -- workload ------------------------------------------------------------------------




def _need_views(wh: Warehouse) -> None:
    present = {r[0] for r in wh.con.execute("select table_name from information_schema.tables").fetchall()}
    missing = [v for v in ("stg_runs", "stg_preemptions", "preemption_ledger", "hoarding_stretches")
               if v not in present]
    if missing:
        raise SchemaError(
            f"warehouse {wh.path} has no view {', '.join(missing)}",
            "run `preemptlens analyze` first: the replay reads the ledger",
        )


def hashed_share(job_id: str, share: float) -> bool:
    digest = hashlib.sha256(job_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def load_workload(
    wh: Warehouse, window: Window, configured: TuningSettings, grid_s: float = 60.0
) -> Workload:
    """JobSpecs of the jobs submitted in `window`, the cluster's pools and the policy in force."""
    _need_views(wh)
    params = {"c": window.cluster, "t0": window.start, "t1": window.end}
    times = wh.query(query_sql("replay", "time_resolution"), params).row(0, named=True)
    # Whole-second run times (sacct) are the true times truncated: each is taken at the middle of its second.
    resolution = 1.0 if times["n"] and not times["fractional"] and not times["exact"] else 0.0
    half = resolution / 2
    actual = policy_in_force(wh, window, configured, half)
    grace = actual.policy.grace_s
    pools_rows = wh.query(
        query_sql("replay", "pool_capacity"),
        {"c": window.cluster, "t1": window.end},
    )
    if pools_rows.height == 0:
        raise SchemaError(
            f"cluster {window.cluster!r} has no pools before {window.end.isoformat()}",
            "the replay needs each pool's GPU count (table pools)",
        )
    pools = []
    # A pool may hold no GPUs now (a quota set to 0, a KAI queue's guarantees taking all of `cluster`):
    # no job can be placed in it, so its jobs are left out and counted.
    pool_list = pools_rows.to_dicts()
    empty = {r["pool"] for r in pool_list if not r["gpus"]}
    for r in pool_list:
        if r["pool"] in empty:
            continue
        gpn = int(r["gpn"] or r["gpus"])
        pools.append(PoolSpec(r["pool"], nodes=max(1, int(r["gpus"]) // gpn), gpus_per_node=gpn))
    by_name = {p.name: p for p in pools}

    rows = wh.query(query_sql("replay", "workload_jobs"), {**params, "g": grace}).to_dicts()
    saves = wh.query(query_sql("replay", "checkpoint_saves"), {"c": window.cluster}).to_dicts()
    intervals = {
        r["job_id"]: r["measured_interval_s"] or r["declared_interval_s"] for r in rows
    }
    job_warmups = {r["job_id"]: r["warmup_s"] for r in rows}
    final_save: dict[str, float] = {}
    regular: set[str] = set()
    for s in saves:
        interval = intervals.get(s["job_id"])
        # A run's regular first checkpoint comes one interval after its work starts (after the warm-up of a
        # restart); a save at the signal comes earlier than the next regular one would have.
        expected = None if interval is None else interval + (
            (job_warmups.get(s["job_id"]) or 0.0) if s["run"] > 1 and s["first_in_run"] else 0.0
        )
        off_cadence = expected is None or (
            s["since_previous_s"] < expected - 1.0 if s["first_in_run"] else abs(s["since_previous_s"] - expected) > 1.0
        )
        if s["save_s"] <= grace and off_cadence and s["save_s"] > 0:
            final_save[s["job_id"]] = max(final_save.get(s["job_id"], 0.0), float(s["save_s"]))
        else:
            regular.add(s["job_id"])
    # A checkpointing victim with no checkpoint in its preempted run saved nothing at the signal either.
    unsaved = wh.query(
        query_sql("replay", "unsaved_victims"),
        {"c": window.cluster},
    )["job_id"].to_list()
    regular.update(j for j in unsaved if intervals.get(j))
    # A run that completed on a preemptor's hosts within the grace time before the preemptor started was
    # signalled and let the preemptor in by finishing: it did not save at the signal (or its save would
    # have outlasted the run). Kept out of the share: it only shows what happened with little time left.
    signalled = set(wh.query(
        query_sql("replay", "signalled_completions"),
        {"c": window.cluster, "g": grace},
    )["job_id"].to_list())
    observed_savers = {j for j in final_save if j not in regular}
    seen = observed_savers | regular
    final_share = len(observed_savers) / len(seen) if seen else 0.0
    save_default = median(final_save.values()) if final_save else 30.0
    # A start-up or warm-up is measured from a run's recorded start.
    warmups = [max(0.0, r["warmup_s"] - half) for r in rows if r["warmup_s"] is not None]
    warmup_default = median(warmups) if warmups else 0.0
    startups = [max(0.0, r["startup_s"] - half) for r in rows if r["startup_s"] is not None]
    startup_default = median(startups) if startups else 0.0

    jobs: list[JobSpec] = []
    skipped: Counter[str] = Counter()
    horizon = window.seconds
    for r in rows:
        pool = by_name.get(r["pool"])
        gpus = int(r["gpus"])
        if pool is None:
            skipped["pool without GPUs" if r["pool"] in empty else "unknown pool"] += 1
            continue
        if gpus < 1 or gpus > pool.gpus or (gpus > pool.gpus_per_node and gpus % pool.gpus_per_node):
            skipped["does not fit its pool"] += 1
            continue
        startup = max(0.0, float(r["startup_s"]) - half) if r["startup_s"] is not None else startup_default
        done = max(0.0, float(r["run_s"] or 0.0) - float(r["waste_s"]) - float(r["idle_total_s"]) - startup)
        fail_after = None
        if r["work_s"] is not None:
            work = float(r["work_s"])
            if r["last_state"] in _STOPPED and not r["still_running"] and done < work:
                # A reservation plans a run for the work it needs (`_planned_end`: no scheduler sees a crash
                # coming), so a first run that stopped is the whole job that fails after what it did.
                if r["runs"] == 1:
                    fail_after = done
                else:
                    work = done
        elif r["still_running"] or r["run_s"] is None:
            # Needs at least what it did plus the rest of the window: it never completes in the replay.
            work = done + horizon
        else:
            work = done
        if work <= 0 or fail_after == 0:
            skipped["no work recorded"] += 1
            continue
        interval = r["measured_interval_s"] or r["declared_interval_s"]
        job_id = str(r["job_id"])
        saver = job_id in observed_savers or (
            job_id not in seen and job_id not in signalled and interval is not None
            and hashed_share(job_id, final_share)
        )
        hoard_idle = hoard_active = None
        if r["idle_median_s"] and r["hoard_active_s"] is not None:
            hoard_idle = max(grid_s, round(float(r["idle_median_s"]) / grid_s) * grid_s)
            hoard_active = max(grid_s, float(r["hoard_active_s"]))
        jobs.append(
            JobSpec(
                job_id=job_id,
                tier=r["tier"],
                preemptible=bool(r["preemptible"]),
                pool=pool.name,
                gpus=gpus,
                submit_s=float(r["submit_s"]) + half,
                work_s=work,
                team=r["team"],
                user=r["user_name"],
                name=r["name"],
                priority_class=r["priority_class"],
                priority_value=r["priority_value"],
                checkpoint_interval_s=float(interval) if interval else None,
                final_checkpoint=saver,
                save_s=final_save.get(job_id, save_default),
                startup_s=startup,
                warmup_s=max(0.0, float(r["warmup_s"]) - half) if r["warmup_s"] is not None else warmup_default,
                hoard_active_s=hoard_active,
                hoard_idle_s=hoard_idle,
                fail_after_work_s=fail_after,
                # What the scheduler planned the job's runs with (Slurm's backfill); unknown: its work left.
                time_limit_s=math.inf if r["time_unlimited"] else (
                    float(r["time_limit_s"]) if r["time_limit_s"] is not None else None),
            )
        )
    notes = [
        f"{len(jobs)} jobs replayed from {window.start.isoformat()} to {window.end.isoformat()}",
        f"warm-up measured for {len(warmups)} jobs, the rest assume the median {significant(warmup_default)} s",
        f"a first run's start-up measured for {len(startups)} jobs, the rest assume the median "
        f"{significant(startup_default)} s",
        f"final checkpoint at the signal seen for {len(observed_savers)} of {len(seen)} preempted jobs with "
        f"checkpoints; jobs never preempted get it with that share ({100 * final_share:.0f}%), "
        f"save time {save_default:.0f} s",
        "reservations planned from the jobs' time limits: "
        f"{sum(1 for j in jobs if j.time_limit_s is not None and j.time_limit_s < math.inf)} with a limit, "
        f"{sum(1 for j in jobs if j.time_limit_s == math.inf)} unlimited (no reservation behind them), "
        f"{sum(1 for j in jobs if j.time_limit_s is None)} unknown (planned for the work they have left)",
        "policy in force: " + actual.describe(),
        *actual.notes,
    ]
    if skipped:
        notes.append("left out: " + ", ".join(f"{n} {why}" for why, n in skipped.items()))
    return Workload(
        window=window,
        pools=tuple(pools),
        jobs=tuple(jobs),
        actual=actual,
        skipped=MappingProxyType(dict(skipped)),
        notes=tuple(notes),
        saves=MappingProxyType({j: final_save[j] for j in observed_savers}),
        final_share=final_share,
        warmup_measured=frozenset(str(r["job_id"]) for r in rows if r["warmup_s"] is not None),
        resolution_s=resolution,
    )


# -- figures ---------------------------------------------------------------------------


def observed_figures(wh: Warehouse, window: Window) -> Figures:
    """The ledger's figures for the jobs submitted in `window` (the population the replay sees)."""
    params = {"c": window.cluster, "t0": window.start, "t1": window.end}
    ledger = wh.query(
        query_sql("replay", "observed_preemptions"),
        params,
    ).row(0, named=True)
    wait = wh.query(
        query_sql("replay", "observed_high_wait"),
        params,
    ).row(0, named=True)
    return Figures(
        preemptions=int(ledger["n"]),
        lost_gpu_h=float(ledger["lost"]),
        high_wait_median_s=None if wait["wait"] is None else float(wait["wait"]),
        victim_jobs=int(ledger["victims"]),
        weeks=window.seconds / _WEEK_S,
        thrown_away_gpu_h=None if ledger["thrown_away"] is None else float(ledger["thrown_away"]),
        high_wait_p90_s=None if wait["wait_p90"] is None else float(wait["wait_p90"]),
    )


@dataclass(frozen=True)
class OutcomeParts:
    """What the figures of a replay are made of, per job of the workload (`jobs`: their indices into the
    workload's jobs, ascending): its preemptions inside the window as (job, lost GPU-seconds, GPUs x
    warm-up seconds, victim job id) in the order the outcome lists them, and the waits of the high tiers'
    jobs as (job, recorded wait). Replays of disjoint pools give parts that `merged` puts back in the
    whole replay's order, so that their figures are the whole replay's to the last bit (sums in one order)."""

    preemptions: tuple[tuple[int, float, float, str], ...]
    waits: tuple[tuple[int, float], ...]

    @classmethod
    def of(cls, out: Outcome, resolution_s: float = 0.0, jobs: Sequence[int] | None = None) -> OutcomeParts:
        """The parts of `out`, whose job k is the workload's job jobs[k] (all of it: k itself)."""

        def recorded(t: float) -> float:
            return math.floor(t / resolution_s) * resolution_s if resolution_s else t

        index = range(len(out.jobs)) if jobs is None else jobs
        found = tuple((index[p.victim], p.lost_gpu_s, p.gpus * p.warmup_s, out.jobs[p.victim].job_id)
                      for p in out.preemptions() if p.time_s < out.horizon_s)
        waits = []
        for j, runs in enumerate(out.job_runs):
            if out.jobs[j].tier not in HIGH_TIERS or not runs:
                continue
            first = out.runs[runs[0]]
            start = out.horizon_s if first.start_s is None else min(first.start_s, out.horizon_s)
            waits.append((index[j], recorded(start) - recorded(out.jobs[j].submit_s)))
        return cls(found, tuple(waits))

    @classmethod
    def merged(cls, parts: Sequence[OutcomeParts]) -> OutcomeParts:
        """Parts of disjoint sets of jobs as one: by job, each job's preemptions in their own order."""
        return cls(tuple(sorted((p for part in parts for p in part.preemptions), key=itemgetter(0))),
                   tuple(sorted(w for part in parts for w in part.waits)))

    def figures(self, horizon_s: float, warmup_measured: frozenset[str] | None = None) -> Figures:
        found = self.preemptions
        waits = [w for _, w in self.waits]
        victims = {p[0]: p[3] for p in found}
        assumed = 0 if warmup_measured is None else sum(1 for v in victims.values() if v not in warmup_measured)
        return Figures(
            preemptions=len(found),
            lost_gpu_h=sum(p[1] for p in found) / 3600.0,
            high_wait_median_s=median(waits) if waits else None,
            victim_jobs=len(victims),
            weeks=horizon_s / _WEEK_S,
            thrown_away_gpu_h=None if assumed and not warmup_measured
            else sum(p[1] + p[2] for p in found) / 3600.0,
            high_wait_p90_s=quantile(waits, 0.9),
            warmup_assumed_victims=assumed,
        )


def outcome_figures(out: Outcome, warmup_measured: frozenset[str] | None = None, resolution_s: float = 0.0
                    ) -> Figures:
    """The same figures from a replay, measured the way the ledger measures them.

    `warmup_measured` (the workload's) tells which victims' warm-up is an assumption: work thrown away is
    unknown when a victim needed one and no warm-up at all was measured to base it on. With `resolution_s`
    (whole seconds), waits are between the truncated times, as the source records them.
    """
    return OutcomeParts.of(out, resolution_s).figures(out.horizon_s, warmup_measured)


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile with linear interpolation between the closest ranks (DuckDB's quantile_cont)."""
    if not values:
        return None
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    below = math.floor(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


# -- replays ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One what-if: a policy, optionally with changed jobs (e.g. other checkpoint intervals); with `jitter`, the
    inputs perturbed within their measurement error by that seed (`jittered_jobs`)."""

    label: str
    policy: PolicyConfig
    job_changes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    protect_near_completion: float | None = None
    jitter: int | None = None


def run_variant(workload: Workload, variant: Variant) -> Figures:
    # The outcome is dropped inside the pause, so the collector never sees it.
    with paused_gc():
        return outcome_figures(_replay(workload, variant), workload.warmup_measured, workload.resolution_s)


def replay_outcome(workload: Workload, variant: Variant) -> Outcome:
    """The whole outcome of one what-if, for a reader that needs more than its Figures (the counterfactual
    headline's per-tier figures)."""
    return _replay(workload, variant)


def _replay(workload: Workload, variant: Variant) -> Outcome:
    jobs, policy = _prepared(workload, variant)
    return _simulate(jobs, workload.pools, policy, workload.horizon_s, variant.protect_near_completion)


def _prepared(workload: Workload, variant: Variant) -> tuple[Sequence[JobSpec], PolicyConfig]:
    """The jobs and the policy a variant replays: jittered, then changed."""
    jobs: Sequence[JobSpec] = workload.jobs
    policy = variant.policy
    if variant.jitter is not None:
        jobs, policy = jittered(workload, policy, variant.jitter)
    if variant.job_changes:
        jobs = [replace(j, **variant.job_changes[j.job_id]) if j.job_id in variant.job_changes else j for j in jobs]
    return jobs, policy


def _simulate(jobs: Sequence[JobSpec], pools: Sequence[PoolSpec], policy: PolicyConfig, horizon_s: float,
              protect_near_completion: float | None) -> Outcome:
    if protect_near_completion is None:
        return simulate_jobs(jobs, pools, policy, horizon_s)
    # Near-completion protection is a knob of the engine, not yet of PolicyConfig.
    return _Scheduler(jobs, pools, policy, horizon_s, 60.0, protect_share=protect_near_completion).run(None)


@dataclass(frozen=True)
class PoolReplay:
    """One pool's share of a what-if: the pool's jobs alone on its GPUs. Pools share no GPUs and the engine
    schedules each on its own (a pass per pool, its own queue, reservation and victims; ties within a pool
    broken in the same order whatever the other pools hold), so the pools' replays together are the whole
    replay, and `OutcomeParts.merged` of their parts gives its figures exactly: a fleet's replay splits into
    tasks for worker processes or Spark executors (analytics.spark.replay_per_pool)."""

    pool: PoolSpec
    jobs: tuple[JobSpec, ...]
    index: tuple[int, ...]  # each job's index into the workload's jobs
    policy: PolicyConfig
    horizon_s: float
    protect_near_completion: float | None
    resolution_s: float

    def parts(self) -> OutcomeParts:
        # The outcome is dropped inside the pause, so the collector never sees it.
        with paused_gc():
            out = _simulate(self.jobs, (self.pool,), self.policy, self.horizon_s, self.protect_near_completion)
            return OutcomeParts.of(out, self.resolution_s, self.index)


def pool_replays(workload: Workload, variant: Variant) -> list[PoolReplay]:
    """The variant's replay split by pool (a pool without jobs has nothing to replay); picklable when the
    variant is (`picklable`)."""
    jobs, policy = _prepared(workload, variant)
    members: dict[str, list[int]] = {p.name: [] for p in workload.pools}
    for k, job in enumerate(jobs):
        members[job.pool].append(k)
    return [PoolReplay(pool, tuple(jobs[k] for k in members[pool.name]), tuple(members[pool.name]), policy,
                       workload.horizon_s, variant.protect_near_completion, workload.resolution_s)
            for pool in workload.pools if members[pool.name]]


def pooled_figures(workload: Workload, parts: Sequence[OutcomeParts]) -> Figures:
    """The figures of a replay run as `pool_replays`, from its pools' parts: those of `run_variant`."""
    return OutcomeParts.merged(parts).figures(workload.horizon_s, workload.warmup_measured)


def jittered(workload: Workload, policy: PolicyConfig, seed: int) -> tuple[list[JobSpec], PolicyConfig]:
    """The workload's jobs and `policy` with their measured inputs drawn again within their measurement error:
    a submission recorded in whole seconds anywhere in its second, a start-up or warm-up measured from such a
    start within half a second, the scheduler's latencies within their measured quartiles. Exact inputs (the
    simulator's) are left as they are, so their interval is a point."""
    rng = random.Random(seed)
    half = workload.resolution_s / 2
    jobs = list(workload.jobs)
    if half:
        jobs = [
            replace(
                j,
                submit_s=j.submit_s + rng.uniform(-half, half),
                startup_s=max(0.0, j.startup_s + rng.uniform(-half, half)) if j.startup_s else 0.0,
                warmup_s=max(0.0, j.warmup_s + rng.uniform(-half, half)) if j.warmup_s else 0.0,
            )
            for j in jobs
        ]
    spread = workload.actual.latency_range
    if spread is not None and policy.latency_s:
        policy = replace(policy, latency_s=max(0.0, rng.uniform(*spread)))
    spread = workload.actual.submit_latency_range
    if spread is not None and policy.submit_latency_s:
        policy = replace(policy, submit_latency_s=max(0.0, rng.uniform(*spread)))
    return jobs, policy


@dataclass(frozen=True)
class Interval:
    """The range of a figure over replays with jittered inputs (`jittered`): how far the measurement error
    alone moves it."""

    low: Figures
    high: Figures
    draws: int
    # Each figure's median over the draws: the replay's estimate once the inputs' error is taken into account.
    median: Figures | None = None

    def of(self, name: str) -> tuple[float | None, float | None]:
        return getattr(self.low, name), getattr(self.high, name)

    def shown(self, name: str, unit: str = "") -> str:
        low, high = self.of(name)
        if low is None or high is None:
            return "unknown"
        if self.draws == 1:
            return f"{significant(low)}{unit} (exact inputs)"
        return f"{significant(low)}-{significant(high)}{unit} over {self.draws} replays"


def uncertain(workload: Workload) -> bool:
    """Whether any input has a measurement error to jitter within (else every interval is a point)."""
    ranges = (workload.actual.latency_range, workload.actual.submit_latency_range)
    return bool(workload.resolution_s) or any(r is not None and r[0] != r[1] for r in ranges)


def jittered_figures(workload: Workload, variant: Variant, draws: int, processes: int | None = None
                     ) -> list[Figures]:
    """The variant replayed with its inputs jittered by seeds 1..draws (paired: one seed draws the same inputs
    for every variant); the plain replay once when no input is uncertain."""
    if draws <= 0:
        return []
    if not uncertain(workload):
        return [run_variant(workload, variant)]
    return sweep(workload, [replace(variant, label=f"{variant.label} jitter {k}", jitter=k)
                            for k in range(1, draws + 1)], processes)


def interval(workload: Workload, variant: Variant, draws: int, processes: int | None = None) -> Interval | None:
    """The range of the variant's figures over `draws` jittered replays; None when draws is 0."""
    found = jittered_figures(workload, variant, draws, processes)
    return Interval(bound(found, min), bound(found, max), len(found), bound(found, median)) if found else None


def bound(figures: Sequence[Figures], pick: Any) -> Figures:
    """Each figure's `pick` (min or max) over several replays' figures."""
    def of(name: str) -> Any:
        values = [getattr(f, name) for f in figures if getattr(f, name) is not None]
        return pick(values) if values else None

    return Figures(
        preemptions=of("preemptions"), lost_gpu_h=of("lost_gpu_h"), high_wait_median_s=of("high_wait_median_s"),
        victim_jobs=of("victim_jobs"), weeks=figures[0].weeks, thrown_away_gpu_h=of("thrown_away_gpu_h"),
        high_wait_p90_s=of("high_wait_p90_s"), warmup_assumed_victims=of("warmup_assumed_victims") or 0,
    )


# The workload a sweep's worker processes replay: set before they fork, so it is
# inherited instead of pickled once per variant.
_SHARED: list[Workload] = []


def _run_shared(variant: Variant) -> Figures:
    return run_variant(_SHARED[0], variant)


def picklable(variant: Variant) -> Variant:
    """`variant` with its policy's read-only mappings as dicts, which a worker process can be sent."""
    policy = variant.policy
    return replace(variant, policy=replace(policy, may_preempt=dict(policy.may_preempt),
                                           min_run_by_tier=dict(policy.min_run_by_tier),
                                           grace_by_tier=dict(policy.grace_by_tier)))


def sweep(workload: Workload, variants: Sequence[Variant], processes: int | None = None) -> list[Figures]:
    """Replay every variant, in parallel across the cores when there are several."""
    workers = min(len(variants), processes or os.cpu_count() or 1)
    if workers <= 1:
        return [run_variant(workload, v) for v in variants]
    _SHARED[:] = [workload]
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_run_shared, [picklable(v) for v in variants]))
    finally:
        _SHARED.clear()


def validate(wh: Warehouse, workload: Workload, tolerance: float) -> tuple[Validation, Figures]:
    """Replay under the actual policy and compare with what the ledger saw."""
    replayed = run_variant(workload, Variant("actual", workload.actual.policy))
    return Validation(observed_figures(wh, workload.window), replayed, tolerance), replayed


def default_window(wh: Warehouse, cluster: str) -> Window:
    row = wh.query(
        query_sql("replay", "default_window"),
        {"c": cluster},
    ).row(0, named=True)
    if row["t0"] is None:
        raise SchemaError(f"cluster {cluster!r} has no jobs in the warehouse", "collect or import jobs first")
    return Window(cluster, row["t0"], row["t1"])
