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
  time minus the progress lost at preemptions, the measured warm-ups, the
  idle-hoarding stretches and the first run's start-up (unless that run was
  preempted before its first checkpoint: its loss holds the start-up). A job
  still running at the end of the data needs at least the window again, so it
  never completes inside the replay.
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

from preemptlens.analytics.simulator.engine import (
    Outcome,
    PreemptionTruth,
    _Scheduler,
    lost_progress_s,
    paused_gc,
)
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec
from preemptlens.analytics.whatif.policy_in_force import PolicyBasis, policy_in_force
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.errors import SchemaError
from preemptlens.reading.words import duration, gpu_hours, plural, significant
from preemptlens.warehouse import Warehouse, query_sql

HIGH_TIERS = ("critical", "high")
_WEEK_S = 7 * 86400.0
# Terminal states in which a job stopped without finishing its work.
_STOPPED = ("failed", "cancelled", "timeout", "node_fail")
# Wait errors are relative to the real wait, but a miss below a second is no miss: sacct records whole seconds.
WAIT_FLOOR_S = 1.0
# Fewer days than this are not extrapolated to a week: a figure per week says so instead.
MIN_DAYS_PER_WEEK = 1.0
# The validation's floors (Validation.checks): a miss is relative to the real figure, or to its floor when that
# is larger, so that a tiny figure does not give a huge relative error. A first-start wait under a minute is
# within one pass of a scheduler's main loop (Slurm's sched_interval defaults to 60 s); GPU-hours below a
# thousandth of the window's GPU capacity (43 GPU-h of a 64-GPU month) and a count below 1% of the window's
# jobs (at least one) move no net by much. The floor is no tolerance: a lost-progress figure the replay doubles
# is still a miss once it is above it.
CHECK_WAIT_FLOOR_S = 60.0
CHECK_GPU_H_FLOOR_SHARE = 0.001
CHECK_COUNT_FLOOR_SHARE = 0.01
TIERS = ("critical", "high", "normal", "low")


@dataclass(frozen=True)
class TierOutcome:
    """One tier's figures that the net against plain queueing is made of, as the record and the replay give them
    among the jobs submitted in the window (cut at its end)."""

    tier: str
    wait_p50_s: float | None  # first-start wait; a job not started waits to the window's end
    wait_p90_s: float | None
    queue_gpu_h: float  # GPUs x (first wait + every wait to restart)
    thrown_away_gpu_h: float | None  # lost progress plus warm-up of the tier's victims; None when unknown
    completed: int


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
    # Per tier (TIERS order, the tiers with jobs): what the validation compares (Validation.checks).
    tiers: tuple[TierOutcome, ...] = ()

    def tier(self, name: str) -> TierOutcome | None:
        return next((t for t in self.tiers if t.tier == name), None)

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
    # Jobs whose final checkpoint at the signal was guessed (drawn with `final_share`, never seen): a jittered
    # replay draws it again.
    guessed_savers: frozenset[str] = frozenset()
    # The GPU sample grid (its step, and where it falls in replay time, sample_grid.sql): idle stretches begin
    # on it. A replay whose grid were off the record's by a fraction of a step would move every hoarder's idle
    # stretches, and through them its checkpoints, ends and who is preempted when.
    grid_s: float = 60.0
    grid_origin_s: float = 0.0

    @property
    def horizon_s(self) -> float:
        return self.window.seconds

    @property
    def grid(self) -> tuple[float, float]:
        """The sample grid as the engine takes it: its step and origin."""
        return self.grid_s, self.grid_origin_s


# What the validation compares, each with how its value reads (Check.figure -> label, unit). Window-wide, then
# per tier: the figures the net against plain queueing is summed from (docs/tuning.md, validation).
CHECKED: Mapping[str, tuple[str, str]] = MappingProxyType({
    "preemptions": ("preemptions", "count"),
    "victims": ("victims", "count"),
    "lost_gpu_h": ("lost GPU-hours", "gpu_h"),
    "thrown_away_gpu_h": ("work thrown away", "gpu_h"),
    "wait_p50_s": ("first-start wait, median", "duration"),
    "wait_p90_s": ("first-start wait, p90", "duration"),
    "queue_gpu_h": ("queue GPU-hours", "gpu_h"),
    "completed": ("jobs completed", "count"),
})
_WINDOW_WIDE = ("preemptions", "victims", "lost_gpu_h", "thrown_away_gpu_h")
_PER_TIER = ("wait_p50_s", "wait_p90_s", "queue_gpu_h", "thrown_away_gpu_h", "completed")


@dataclass(frozen=True)
class Check:
    """One figure of the record against the replay under the policy in force."""

    figure: str  # a key of CHECKED
    tier: str  # 'all': the whole window
    observed: float | None
    replayed: float | None
    floor: float
    error: float | None  # relative to max(|observed|, floor); None when either side is unknown
    # Whether the figure differs between the policies replayed: one that is the same under every policy (a
    # median wait of 0 s whatever the policy) cannot tell a replay that gets the answer right from one that
    # does not, so it is no check.
    decides: bool

    @property
    def label(self) -> str:
        name = CHECKED[self.figure][0]
        return name if self.tier == "all" else f"{self.tier} {name}"


@dataclass(frozen=True)
class Validation:
    observed: Figures
    replayed: Figures
    tolerance: float
    # The same workload's figures under the other policies replayed (none, triggers, ...): what tells which
    # figures decide between them. Empty: every figure counts.
    others: tuple[Figures, ...] = ()
    # The window's GPU capacity and jobs, the floors' scale (CHECK_*_FLOOR_SHARE); None: no floor.
    capacity_gpu_h: float | None = None
    jobs: int | None = None

    @property
    def errors(self) -> dict[str, float | None]:
        """Relative error of the window-wide figures (None when the observed figure is zero or missing)."""
        pairs = {
            "preemptions": (self.observed.preemptions, self.replayed.preemptions),
            "victims": (self.observed.victim_jobs, self.replayed.victim_jobs),
            "lost_gpu_h": (self.observed.lost_gpu_h, self.replayed.lost_gpu_h),
            "high_wait_median_s": (self.observed.high_wait_median_s, self.replayed.high_wait_median_s),
        }
        return {k: _relative(o, r, WAIT_FLOOR_S if k == "high_wait_median_s" else 0.0) for k, (o, r) in pairs.items()}

    def _floor(self, figure: str) -> float:
        unit = CHECKED[figure][1]
        if unit == "duration":
            return CHECK_WAIT_FLOOR_S
        if unit == "gpu_h":
            return CHECK_GPU_H_FLOOR_SHARE * self.capacity_gpu_h if self.capacity_gpu_h else 0.0
        return max(1.0, CHECK_COUNT_FLOOR_SHARE * self.jobs) if self.jobs else 1.0

    @property
    def checks(self) -> tuple[Check, ...]:
        """Every figure the net is made of, the record against the replay, each with its floor and whether it
        differs between the policies replayed."""
        found = []
        for tier in ("all", *TIERS):
            names = _WINDOW_WIDE if tier == "all" else _PER_TIER
            if tier != "all" and self.observed.tier(tier) is None and self.replayed.tier(tier) is None:
                continue
            for name in names:
                real, again = _value(self.observed, tier, name), _value(self.replayed, tier, name)
                floor = self._floor(name)
                decides = not self.others or any(
                    not _same(again, _value(other, tier, name)) for other in self.others)
                found.append(Check(name, tier, real, again, floor, _relative(real, again, floor), decides))
        return tuple(found)

    @property
    def ok(self) -> bool:
        """The replay reproduces the window: every figure that decides between the policies is within the
        tolerance (and there is one: figures that are the same under every policy prove nothing)."""
        used = [c for c in self.checks if c.decides and c.error is not None]
        return bool(used) and all(c.error is not None and c.error <= self.tolerance for c in used)

    def rows(self) -> list[dict[str, Any]]:
        """The checks as stored (counterfactual_runs.validation) and worded (validation_text)."""
        return [{"figure": c.figure, "tier": c.tier, "observed": c.observed, "replayed": c.replayed,
                 "floor": c.floor, "error": c.error, "decides": c.decides} for c in self.checks]

    def describe(self) -> str:
        return validation_text(self.rows(), self.tolerance)


def _value(figures: Figures, tier: str, name: str) -> float | None:
    if tier == "all":
        value = {"preemptions": figures.preemptions, "victims": figures.victim_jobs,
                 "lost_gpu_h": figures.lost_gpu_h, "thrown_away_gpu_h": figures.thrown_away_gpu_h}[name]
    else:
        found = figures.tier(tier)
        value = None if found is None else getattr(found, name)
    return None if value is None else float(value)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _worded(value: float | None, figure: str) -> str:
    unit = CHECKED[figure][1]
    if unit == "duration":
        return duration(value)
    if unit == "gpu_h":
        return gpu_hours(value)
    return significant(value)


def _check_text(c: Mapping[str, Any]) -> str:
    check = Check(**c)
    floor = (f", against its floor {_worded(check.floor, check.figure)}"
             if check.observed is not None and check.floor > abs(check.observed) else "")
    return (f"{check.label} {100 * (check.error or 0.0):.1f}% off ({_worded(check.observed, check.figure)} real, "
            f"{_worded(check.replayed, check.figure)} replayed{floor})")


def validation_text(checks: Sequence[Mapping[str, Any]], tolerance: float) -> str:
    """The validation in one sentence: the figures the replay misses by more than the tolerance (else its largest
    miss), and those that are no check (the same under every policy, or unknown in the record)."""
    limit = f"{100 * tolerance:.0f}%"
    used = [c for c in checks if c["decides"] and c["error"] is not None]
    missed = sorted((c for c in used if c["error"] > tolerance), key=lambda c: -c["error"])
    if not used:
        text = ("the replay under today's policy cannot be checked against the recorded window: no figure it "
                "reproduces differs between the policies replayed")
    elif missed:
        text = (f"the replay under today's policy does NOT reproduce the recorded window within {limit}: "
                + "; ".join(_check_text(c) for c in missed)
                + f" ({len(used) - len(missed)} of the {len(used)} figures that differ between policies within it)")
    else:
        worst = max(used, key=lambda c: c["error"])
        text = (f"the replay under today's policy reproduces the recorded window within {limit} on the {len(used)} "
                f"figures that differ between policies (largest miss: {_check_text(worst)})")
    same = [Check(**c).label for c in checks if not c["decides"]]
    if same:
        text += "; no check, the same under every policy: " + ", ".join(same)
    unknown = [Check(**c).label for c in checks if c["decides"] and c["error"] is None]
    if unknown:
        text += "; unknown in the record or the replay: " + ", ".join(unknown)
    return text


def missed_labels(checks: Sequence[Mapping[str, Any]], tolerance: float) -> list[str]:
    """The figures that decide between policies and that the replay misses by more than the tolerance."""
    return [Check(**c).label for c in checks
            if c["decides"] and c["error"] is not None and c["error"] > tolerance]


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


def load_workload(wh: Warehouse, window: Window, configured: TuningSettings) -> Workload:
    """JobSpecs of the jobs submitted in `window`, the cluster's pools and the policy in force."""
    _need_views(wh)
    params = {"c": window.cluster, "t0": window.start, "t1": window.end}
    grid_s, grid_origin_s = _sample_grid(wh, window)
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
    guessed_savers: set[str] = set()
    skipped: Counter[str] = Counter()
    horizon = window.seconds
    open_work = 0  # jobs not finished at the data's end whose work the source does not give
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
        # A first run preempted before its first checkpoint lost its whole run, start-up included, which the
        # waste holds already (subtracting it again made such a job's work too short by its start-up).
        done = max(0.0, float(r["run_s"] or 0.0) - float(r["waste_s"]) - float(r["idle_total_s"])
                   - (0.0 if r["startup_lost"] else startup))
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
            open_work += 1
        else:
            work = done
        if work <= 0 or fail_after == 0:
            skipped["no work recorded"] += 1
            continue
        interval = r["measured_interval_s"] or r["declared_interval_s"]
        job_id = str(r["job_id"])
        guessed = job_id not in seen and job_id not in signalled and interval is not None
        if guessed:
            guessed_savers.add(job_id)
        saver = job_id in observed_savers or (guessed and hashed_share(job_id, final_share))
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
    if open_work:
        notes.append(f"{open_work} jobs not finished at the data's end give no work needed: each is replayed as "
                     "needing what it did plus the window's length again, so a drained replay holds their GPUs that "
                     "long after the window's end (a guess: the waiting after the window's end behind them is rough)")
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
        guessed_savers=frozenset(guessed_savers),
        grid_s=grid_s,
        grid_origin_s=grid_origin_s,
    )


def _sample_grid(wh: Warehouse, window: Window) -> tuple[float, float]:
    """The GPU sample grid's step and where it falls in replay time (seconds after the window's start, the
    replay's 0): the recorded idle stretches begin on it, and the replayed ones must too. Without samples, the
    engine's default grid (no idle stretch is replayed then)."""
    params = {"c": window.cluster, "t0": window.start, "t1": window.end}
    row = wh.query(query_sql("replay", "sample_grid"), params).row(0, named=True)
    if not row["step_s"]:
        return 60.0, 0.0
    step = float(row["step_s"])
    return step, (float(row["first_s"]) - window.start.timestamp()) % step


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
    by_tier = {r["tier"]: r for r in wh.query(query_sql("replay", "observed_tiers"), params).to_dicts()}
    tiers = tuple(
        TierOutcome(t, _float(r["wait_p50_s"]), _float(r["wait_p90_s"]), float(r["queue_gpu_h"]),
                    _float(r["thrown_away_gpu_h"]), int(r["completed"]))
        for t in TIERS if (r := by_tier.get(t)) is not None
    )
    return Figures(
        preemptions=int(ledger["n"]),
        lost_gpu_h=float(ledger["lost"]),
        high_wait_median_s=None if wait["wait"] is None else float(wait["wait"]),
        victim_jobs=int(ledger["victims"]),
        weeks=window.seconds / _WEEK_S,
        thrown_away_gpu_h=None if ledger["thrown_away"] is None else float(ledger["thrown_away"]),
        high_wait_p90_s=None if wait["wait_p90"] is None else float(wait["wait_p90"]),
        tiers=tiers,
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def as_recorded(p: PreemptionTruth, resolution_s: float) -> tuple[float, float]:
    """A replayed preemption's lost progress and its restart's warm-up, GPU-seconds, as the ledger counts them
    where the record's times are truncated to `resolution_s` (0: exact, the simulator's own).

    The ledger measures lost progress without a checkpoint (docs/figures.md, `lost_s`) and a restart's warm-up
    (`warmup_s`) from a run's start as recorded: sacct truncates it to the second, on average half of it before
    the true start (the preemption keeps its link's millisecond, a checkpoint the job's own). A replay's times
    stand for true ones with no phase within the second (`load_workload` takes a recorded time at the middle of
    its second, and measures a warm-up from there), so what the ledger would count for a replayed run is its
    expectation: half the resolution more. Counted from the replay's exact start, the real Slurm's plays lost
    half a second less than the ledger per such preemption and per warm-up of about 3.8 s (issue 31).
    """
    half = resolution_s / 2
    lost = p.gpus * lost_progress_s(p.time_s, p.run_start_s - half, p.last_checkpoint_s)
    # no warm-up where the restart's own loss holds it (the engine's `preemptions`)
    return lost, (p.gpus * (p.warmup_s + half) if p.warmup_s else 0.0)


@dataclass(frozen=True)
class OutcomeParts:
    """What the figures of a replay are made of, per job of the workload (`jobs`: their indices into the
    workload's jobs): its preemptions inside the window as (job, lost GPU-seconds, GPUs x warm-up seconds,
    victim job id, victim tier), by job and in the outcome's order within a job, and each job with a run as
    (job, tier, first-start wait as recorded, queue GPU-seconds as recorded, completed in the window). Replays of
    disjoint pools give parts that `merged` puts in the same order, so that their figures are the whole
    replay's to the last bit (sums in one order)."""

    preemptions: tuple[tuple[int, float, float, str, str], ...]
    jobs: tuple[tuple[int, str, float, float, bool], ...]

    @classmethod
    def of(cls, out: Outcome, resolution_s: float = 0.0, jobs: Sequence[int] | None = None) -> OutcomeParts:
        """The parts of `out`, whose job k is the workload's job jobs[k] (all of it: k itself). Queue time, lost
        progress and warm-up as the record holds them: the first wait, then each restart from its requeue to its
        start, between times truncated to `resolution_s`; lost progress and warm-up from a start so truncated (on
        average half the resolution before the replayed one)."""

        def recorded(t: float) -> float:
            return math.floor(t / resolution_s) * resolution_s if resolution_s else t

        horizon = out.horizon_s
        index = range(len(out.jobs)) if jobs is None else jobs
        found = sorted(((index[p.victim], *as_recorded(p, resolution_s), out.jobs[p.victim].job_id,
                         out.jobs[p.victim].tier) for p in out.preemptions() if p.time_s < horizon),
                       key=itemgetter(0))
        rows = []
        for j, runs in enumerate(out.job_runs):
            if not runs:
                continue
            job = out.jobs[j]
            first = out.runs[runs[0]]
            start = horizon if first.start_s is None else min(first.start_s, horizon)
            wait = recorded(start) - recorded(job.submit_s)
            queue = job.gpus * wait
            for r in runs[1:]:
                run = out.runs[r]
                began = horizon if run.start_s is None else min(run.start_s, horizon)
                queue += job.gpus * max(0.0, recorded(began) - recorded(min(run.submit_s, horizon)))
            last = out.runs[runs[-1]]
            done = last.state == "completed" and last.end_s is not None and last.end_s <= horizon
            rows.append((index[j], job.tier, wait, queue, done))
        rows.sort(key=itemgetter(0))
        return cls(tuple(found), tuple(rows))

    @classmethod
    def merged(cls, parts: Sequence[OutcomeParts]) -> OutcomeParts:
        """Parts of disjoint sets of jobs as one: by job, each job's preemptions in their own order."""
        return cls(tuple(sorted((p for part in parts for p in part.preemptions), key=itemgetter(0))),
                   tuple(sorted((r for part in parts for r in part.jobs), key=itemgetter(0))))

    def figures(self, horizon_s: float, warmup_measured: frozenset[str] | None = None) -> Figures:
        found = self.preemptions
        waits = []
        first_waits: dict[str, list[float]] = {t: [] for t in TIERS}
        queue_s: dict[str, float] = dict.fromkeys(TIERS, 0.0)
        completed: Counter[str] = Counter()
        for _, tier, wait, queue, done in self.jobs:
            first_waits[tier].append(wait)
            if tier in HIGH_TIERS:
                waits.append(wait)
            queue_s[tier] += queue
            completed[tier] += done
        victims = {p[0]: p[3] for p in found}
        assumed = 0 if warmup_measured is None else sum(1 for v in victims.values() if v not in warmup_measured)
        unknown_thrown = bool(assumed and not warmup_measured)
        thrown: dict[str, float] = dict.fromkeys(TIERS, 0.0)
        for p in found:
            thrown[p[4]] += p[1] + p[2]
        tiers = tuple(
            TierOutcome(t, quantile(first_waits[t], 0.5), quantile(first_waits[t], 0.9), queue_s[t] / 3600.0,
                        None if unknown_thrown else thrown[t] / 3600.0, completed[t])
            for t in TIERS if first_waits[t]
        )
        return Figures(
            preemptions=len(found),
            lost_gpu_h=sum(p[1] for p in found) / 3600.0,
            high_wait_median_s=median(waits) if waits else None,
            victim_jobs=len(victims),
            weeks=horizon_s / _WEEK_S,
            thrown_away_gpu_h=None if unknown_thrown else sum(thrown.values()) / 3600.0,
            high_wait_p90_s=quantile(waits, 0.9),
            warmup_assumed_victims=assumed,
            tiers=tiers,
        )


def outcome_figures(out: Outcome, warmup_measured: frozenset[str] | None = None, resolution_s: float = 0.0
                    ) -> Figures:
    """The same figures from a replay, measured the way the ledger measures them.

    `warmup_measured` (the workload's) tells which victims' warm-up is an assumption: work thrown away is
    unknown when a victim needed one and no warm-up at all was measured to base it on. With `resolution_s`
    (whole seconds), waits are between the truncated times, and lost progress without a checkpoint and a
    restart's warm-up run from a truncated start (on average half a second early), as the source records them.
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


def replay_outcome(workload: Workload, variant: Variant, drain: bool = False) -> Outcome:
    """The whole outcome of one what-if, for a reader that needs more than its Figures (the counterfactual
    headline's per-tier figures). With `drain`, the jobs submitted in the window are replayed to completion
    with no arrivals after its end (the outcome's horizon is then infinite): no figure is cut at the window's
    end. Up to the window's end a drained replay is the same replay (`window_view`)."""
    return _replay(workload, variant, drain)


def window_view(out: Outcome, window_s: float) -> Outcome:
    """A drained outcome read as if the replay had stopped at the window's end: every reader of an outcome cuts
    runs, preemptions and waits at its horizon."""
    return replace(out, horizon_s=min(out.horizon_s, window_s))


def _replay(workload: Workload, variant: Variant, drain: bool = False) -> Outcome:
    jobs, policy = _prepared(workload, variant)
    # Every job is submitted in the window, so an infinite horizon adds no arrival: the engine stops once no
    # event is left (every job done, or waiting for GPUs that never come).
    horizon = math.inf if drain else workload.horizon_s
    return _simulate(jobs, workload.pools, policy, horizon, variant.protect_near_completion,
                     workload.grid)


def _prepared(workload: Workload, variant: Variant) -> tuple[Sequence[JobSpec], PolicyConfig]:
    """The jobs and the policy a variant replays: jittered (and their order shuffled), then changed."""
    jobs: Sequence[JobSpec] = workload.jobs
    policy = variant.policy
    if variant.jitter is not None:
        jobs, policy = jittered(workload, policy, variant.jitter)
        # The engine breaks ties (arrivals at one instant, runs started or requeued together, victims of equal
        # rank) by job order: shuffled, so that the draws also cover the order of simultaneous events. The
        # outcome's jobs are in this order; readers that pair jobs across replays match them by job id.
        jobs = [jobs[k] for k in event_order(len(jobs), variant.jitter)]
    if variant.job_changes:
        jobs = [replace(j, **variant.job_changes[j.job_id]) if j.job_id in variant.job_changes else j for j in jobs]
    return jobs, policy


def _simulate(jobs: Sequence[JobSpec], pools: Sequence[PoolSpec], policy: PolicyConfig, horizon_s: float,
              protect_near_completion: float | None, grid: tuple[float, float]) -> Outcome:
    # Near-completion protection is a knob of the engine, not yet of PolicyConfig.
    return _Scheduler(jobs, pools, policy, horizon_s, grid[0], protect_share=protect_near_completion,
                      grid_origin_s=grid[1]).run(None)


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
    grid: tuple[float, float]  # the sample grid's step and origin (Workload.grid)

    def parts(self) -> OutcomeParts:
        # The outcome is dropped inside the pause, so the collector never sees it.
        with paused_gc():
            out = _simulate(self.jobs, (self.pool,), self.policy, self.horizon_s, self.protect_near_completion,
                            self.grid)
            return OutcomeParts.of(out, self.resolution_s, self.index)


def pool_replays(workload: Workload, variant: Variant) -> list[PoolReplay]:
    """The variant's replay split by pool (a pool without jobs has nothing to replay); picklable when the
    variant is (`picklable`)."""
    jobs, policy = _prepared(workload, variant)
    members: dict[str, list[int]] = {p.name: [] for p in workload.pools}
    for k, job in enumerate(jobs):
        members[job.pool].append(k)
    return [PoolReplay(pool, tuple(jobs[k] for k in members[pool.name]), tuple(members[pool.name]), policy,
                       workload.horizon_s, variant.protect_near_completion, workload.resolution_s,
                       workload.grid)
            for pool in workload.pools if members[pool.name]]


def pooled_figures(workload: Workload, parts: Sequence[OutcomeParts]) -> Figures:
    """The figures of a replay run as `pool_replays`, from its pools' parts: those of `run_variant`."""
    return OutcomeParts.merged(parts).figures(workload.horizon_s, workload.warmup_measured)


def event_order(n: int, seed: int) -> list[int]:
    """The job order a jittered replay (seed `seed`) hands the engine: the same for every variant, so that the
    draws stay paired."""
    order = list(range(n))
    random.Random(f"event order {seed}").shuffle(order)
    return order


def jittered(workload: Workload, policy: PolicyConfig, seed: int) -> tuple[list[JobSpec], PolicyConfig]:
    """The workload's jobs and `policy` with their measured inputs drawn again within their measurement error:
    a submission recorded in whole seconds anywhere in its second, a start-up or warm-up measured from such a
    start within half a second, the scheduler's latencies within their measured quartiles; a guessed input
    (an assumed warm-up, a final checkpoint at the signal nobody saw) drawn from what it was guessed from. Exact
    inputs (the simulator's) are left as they are; a replay with `Variant.jitter` also shuffles the order of
    simultaneous events (`event_order`), which moves even an exact workload's figures."""
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
    # A guessed input is as uncertain as what it was guessed from: an assumed warm-up (the median of the measured
    # ones) is drawn from the measured ones, and a guessed final checkpoint at the signal (a hash of the job id
    # against the observed share) is drawn again with that share. Their own generator keeps the draws above as
    # they were.
    guess = random.Random(f"guesses {seed}")
    measured = workload.warmup_measured
    warmups = [j.warmup_s for j in jobs if measured is not None and j.job_id in measured]
    if warmups or workload.guessed_savers:
        jobs = [
            replace(
                j,
                warmup_s=guess.choice(warmups) if warmups and j.job_id not in measured else j.warmup_s,  # type: ignore[operator]
                final_checkpoint=guess.random() < workload.final_share if j.job_id in workload.guessed_savers
                else j.final_checkpoint,
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
    """The range of a figure over replays with jittered inputs and event order (`jittered`, `event_order`): how
    far the measurement error and the engine's tie-breaks alone move it."""

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
        if low == high:
            return f"{significant(low)}{unit} (the same over {plural(self.draws, 'replay')})"
        return f"{significant(low)}-{significant(high)}{unit} over {self.draws} replays"


def jittered_figures(workload: Workload, variant: Variant, draws: int, processes: int | None = None
                     ) -> list[Figures]:
    """The variant replayed with its inputs and its event order jittered by seeds 1..draws (paired: one seed
    draws the same inputs and order for every variant). Even exact inputs are replayed `draws` times: the order
    of simultaneous events is no measurement, and the replay can be sensitive to it."""
    if draws <= 0:
        return []
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
    """Replay under the actual policy and compare with what the ledger saw, on the figures that differ from plain
    queueing (replayed too: a figure the same under both proves nothing)."""
    replayed, plain = sweep(workload, [Variant("actual", workload.actual.policy),
                                       Variant("none", replace(workload.actual.policy, enabled=False))], 1)
    return validation(wh, workload, replayed, (plain,), tolerance), replayed


def validation(wh: Warehouse, workload: Workload, replayed: Figures, others: Sequence[Figures], tolerance: float
               ) -> Validation:
    """The record against `replayed` (the policy in force), with the other policies' figures and the floors'
    scale: the window's GPU capacity and jobs."""
    capacity = sum(p.gpus for p in workload.pools) * workload.window.seconds / 3600.0
    return Validation(observed_figures(wh, workload.window), replayed, tolerance, tuple(others), capacity,
                      len(workload.jobs))


def default_window(wh: Warehouse, cluster: str) -> Window:
    row = wh.query(
        query_sql("replay", "default_window"),
        {"c": cluster},
    ).row(0, named=True)
    if row["t0"] is None:
        raise SchemaError(f"cluster {cluster!r} has no jobs in the warehouse", "collect or import jobs first")
    return Window(cluster, row["t0"], row["t1"])
