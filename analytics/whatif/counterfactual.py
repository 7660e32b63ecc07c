"""Does preemption pay here? The recorded window replayed without preemption and under alternatives.

The article's first question ("is preemption more efficient than plain queueing?") is answered by replaying
the cluster's own recorded workload (analytics/whatif/replay.py) four ways on the same jobs:

- (a) `none`: no preemption at all, plain queueing;
- (b) `today`: the policy in force (the replay's error against the ledger is measured on this one);
- (c) `trigger_<T>`: today's policy with the article's trigger threshold written down in advance: a job may
  preempt only once it has waited T (`analytics.trigger_wait_candidates_s`);
- (d) `best`: the alternative `preemptlens suggest` ranks first (a scheduler setting or one of preemptlens's
  actions, replayed as it acts); until suggest has run on this window, the action of the scheduler modelled
  (`applicable_protection`) with its default settings, holding costly victims back;
- (e) `bound`: victims chosen by least live cost, which no scheduler offers: a bound on what choosing victims
  could give "if the scheduler could choose", never a fix.

Every scenario drains: the jobs submitted in the window are replayed to completion with nothing arriving after
its end, so no figure is cut at the window's end; a job with a run that never starts (it never fits) cannot
drain, is counted and stays out of the queue time and the net. Each gives, per tier, the first-start wait
(median, p90), the completion time, work thrown away, victims' waiting, all queue time (and its part after the
window's end) and busy GPU-hours, and against (a) the jobs whose queue time changed and by how much per job
(docs/figures.md, section 10). The headline compares (b) with (a):
preemption saved the critical and high tiers X GPU-hours of queue time, and cost Y GPU-hours of work thrown
away and Z GPU-hours of lower-tier queue time. In a work-conserving queue preemption mostly moves waiting from
one tier to another and adds thrown-away work, so whether that pays is set by `analytics.tier_weights`: the
net value weighs each job's change in queue time and thrown-away work by its tier, and the break-even factor
is the multiple of the critical and high weights at which the net is zero.

Both sides come from replays of the same jobs, so the replay's own error (shown beside them) affects both
alike. Each net's interval covers two things at once (docs/figures.md, "What a counterfactual's interval
covers"): the sample, by a bootstrap over blocks of jobs (submission days; in a window under a week, stretches of
it, or the jobs themselves: `resampling_blocks`), and the replay's own sensitivity, by replaying every scenario
again with its inputs drawn within their measurement error and the order of simultaneous events shuffled
(`tuning.jitter_replays` seeds, paired across scenarios: replay.Variant.jitter).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import multiprocessing
import os
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from preemptlens.analytics.actions import ACTIONS, DEFAULT_CYCLE_S
from preemptlens.analytics.simulator.engine import Outcome, paused_gc
from preemptlens.analytics.simulator.model import PolicyConfig, Protection
from preemptlens.analytics.whatif.replay import (
    Figures,
    Validation,
    Variant,
    Workload,
    default_window,
    load_workload,
    outcome_figures,
    picklable,
    replay_outcome,
    validation,
    window_view,
)
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.contract import TIERS
from preemptlens.errors import PreemptlensError
from preemptlens.reading.words import GPU_H, change, duration, plural, significant
from preemptlens.warehouse import Warehouse

if TYPE_CHECKING:
    from preemptlens.analytics.params import AnalyticsSettings

log = logging.getLogger(__name__)

HIGH = ("critical", "high")
LOWER = ("normal", "low")
_SEED = 20260105  # fixed: the same data always gives the same interval
_DAY_S = 86400.0


@dataclass(frozen=True)
class TierFigures:
    """One tier's figures in one scenario (tier 'all' for every job)."""

    tier: str
    jobs: int
    wait_p50_s: float | None
    wait_p90_s: float | None
    completion_p50_s: float | None
    completed: int
    preemptions: int
    thrown_away_gpu_h: float
    victim_waiting_gpu_h: float
    waiting_gpu_h: float  # jobs that cannot drain left out
    busy_gpu_h: float
    # Of waiting_gpu_h, the queue time after the window's end: what a replay cut at the window's end would miss
    # (or, for a run not started by then, count only to the end).
    late_waiting_gpu_h: float = 0.0
    # Jobs with a run that never started by the end of a drained replay (none fit): out of the figures' queue time
    # and of the net.
    undrained: int = 0


@dataclass(frozen=True)
class JobTable:
    """Per job of a replay, in the workload's job order: what the figures and the net are summed from."""

    tier: np.ndarray  # index into TIERS
    gpus: np.ndarray
    day: np.ndarray  # submission day, from the window's start
    first_wait_s: np.ndarray
    completion_s: np.ndarray  # NaN: not completed in the replay
    waiting_s: np.ndarray  # all queue time: first wait and every wait to restart, to the replay's end
    thrown_gpu_s: np.ndarray  # lost progress + warm-up paid in the replay
    victim_waiting_gpu_s: np.ndarray  # GPUs x (restart or replay end - preemption), over its preemptions
    busy_gpu_s: np.ndarray  # GPUs x run time in the replay, less idle stretches
    preemptions: np.ndarray
    submit_s: np.ndarray | None = None  # seconds from the window's start (resampling_blocks)
    late_waiting_s: np.ndarray | None = None  # of waiting_s, the part after the window's end
    undrained: np.ndarray | None = None  # a drained replay never started one of its runs: out of the net

    def drained(self) -> np.ndarray:
        """The jobs whose figures are complete: every job but those that cannot drain."""
        return np.ones(self.tier.size, bool) if self.undrained is None else ~self.undrained


def job_table(out: Outcome, start_day_s: float = 0.0, window_s: float | None = None) -> JobTable:
    """Per-job figures of a replay (or a simulation: the same engine). `start_day_s` is the window's start
    in seconds after midnight UTC, so that `day` counts UTC days.

    A replay cut at its horizon counts a run not started by then to the horizon. A drained one (infinite
    horizon: `replay_outcome(drain=True)`) counts every figure to the replay's end, and `window_s`, the window's
    length, splits off the queue time after it (`late_waiting_s`); a job with a run that never started (it never
    fits) cannot drain: its queue time runs to the replay's last event, and it is flagged `undrained`."""
    horizon = out.horizon_s
    drained = math.isinf(horizon)
    end = horizon
    if drained:
        # The replay's last event: every started run's end (none runs forever once drained), every submission.
        end = max([j.submit_s for j in out.jobs]
                  + [r.end_s if r.end_s is not None else r.start_s for r in out.runs if r.start_s is not None],
                  default=0.0)
    window = end if window_s is None else min(window_s, end)
    n = len(out.jobs)
    tier_index = {t: i for i, t in enumerate(TIERS)}
    tier = np.array([tier_index[j.tier] for j in out.jobs], dtype=np.int64)
    gpus = np.array([j.gpus for j in out.jobs], dtype=float)
    submit = np.array([j.submit_s for j in out.jobs], dtype=float)
    first_wait = np.full(n, np.nan)
    completion = np.full(n, np.nan)
    waiting = np.zeros(n)
    late = np.zeros(n)
    busy = np.zeros(n)
    undrained = np.zeros(n, bool)
    for j, run_ids in enumerate(out.job_runs):
        if not run_ids:
            continue
        for k, r in enumerate(run_ids):
            run = out.runs[r]
            began = end if run.start_s is None else min(run.start_s, end)
            queued = min(run.submit_s, end)
            waiting[j] += max(0.0, began - queued)
            late[j] += max(0.0, began - max(queued, window))
            if k == 0 and not (drained and run.start_s is None):
                first_wait[j] = max(0.0, began - queued)
            if run.start_s is None:
                undrained[j] = drained
                continue
            if run.start_s >= end:
                continue
            stop = end if run.end_s is None else min(run.end_s, end)
            idle = sum(max(0.0, min(b, stop) - a) for a, b in run.idle if a < stop)
            busy[j] += gpus[j] * max(0.0, stop - run.start_s - idle)
        last = out.runs[run_ids[-1]]
        if last.state == "completed" and last.end_s is not None and last.end_s <= end:
            completion[j] = last.end_s - submit[j]
    thrown = np.zeros(n)
    victim_waiting = np.zeros(n)
    preemptions = np.zeros(n, dtype=np.int64)
    for p in out.preemptions():
        if p.time_s >= end and not drained:
            continue
        preemptions[p.victim] += 1
        thrown[p.victim] += p.lost_gpu_s
        if p.restart_s is not None and (drained or p.restart_s < end):
            # the warm-up is paid when the victim restarts, and only its part inside a cut replay
            thrown[p.victim] += p.gpus * (p.warmup_s if drained else min(p.warmup_s, end - p.restart_s))
        back = end if p.restart_s is None else min(p.restart_s, end)
        victim_waiting[p.victim] += p.gpus * (back - p.time_s)
    day = np.floor((submit + start_day_s) / _DAY_S).astype(np.int64)
    return JobTable(tier, gpus, day, first_wait, completion, waiting, thrown, victim_waiting, busy, preemptions,
                    submit, late, undrained)


def hourly_allocated(out: Outcome, start_hour_s: float = 0.0) -> np.ndarray:
    """GPU-seconds allocated to runs in each UTC hour of a replay; hour k covers [k x 3600 - start_hour_s,
    (k + 1) x 3600 - start_hour_s) seconds after the replay's start, where `start_hour_s` is the start's
    seconds past its UTC hour. Idle stretches are left in: the scorecard takes out the idle GPU-seconds it
    measured (hoarding_stretches), not the replay's model of them."""
    horizon = out.horizon_s
    allocated = np.zeros(math.ceil((horizon + start_hour_s) / 3600.0))
    for run in out.runs:
        if run.start_s is None or run.start_s >= horizon:
            continue
        gpus = float(out.jobs[run.job].gpus)
        a = run.start_s + start_hour_s
        b = (horizon if run.end_s is None else min(run.end_s, horizon)) + start_hour_s
        while a < b:
            k = int(a // 3600.0)
            end = min(b, (k + 1) * 3600.0)
            allocated[k] += gpus * (end - a)
            a = end
    return allocated


def _quantile(values: np.ndarray, q: float) -> float | None:
    values = values[~np.isnan(values)]
    # linear interpolation between the closest ranks, as DuckDB's quantile_cont
    return None if values.size == 0 else float(np.quantile(values, q))


def _tier_masks(table: JobTable) -> list[tuple[str, np.ndarray]]:
    """Each tier's jobs, then every job ('all')."""
    return [*((t, table.tier == i) for i, t in enumerate(TIERS)), ("all", np.ones_like(table.gpus, bool))]


def _queued_gpu_s(table: JobTable, mask: np.ndarray) -> np.ndarray:
    """Per job, the GPU-seconds `mask`'s jobs spent in the queue (0 for the others and for jobs that cannot
    drain): what a tier's queue GPU-hours sum."""
    return np.where(mask & table.drained(), table.gpus * table.waiting_s, 0.0)


def tier_figures(table: JobTable) -> tuple[TierFigures, ...]:
    """The figures per tier, and over all tiers ('all'), of one replay's jobs."""
    found = []
    drained = table.drained()
    ones = np.ones(table.tier.size)
    for name, mask in _tier_masks(table):
        # each job counted once: the figures whose intervals figure_intervals makes by reweighing them
        quantiles, totals = _own_figures(table, mask)
        found.append(TierFigures(
            tier=name,
            jobs=int((mask & ~np.isnan(table.first_wait_s)).sum()),
            wait_p50_s=quantiles["wait_p50_s"](ones),
            wait_p90_s=quantiles["wait_p90_s"](ones),
            completion_p50_s=quantiles["completion_p50_s"](ones),
            completed=int((mask & ~np.isnan(table.completion_s)).sum()),
            preemptions=int(table.preemptions[mask].sum()),
            thrown_away_gpu_h=totals["thrown_away_gpu_h"](ones),
            victim_waiting_gpu_h=totals["victim_waiting_gpu_h"](ones),
            waiting_gpu_h=totals["waiting_gpu_h"](ones),
            busy_gpu_h=totals["busy_gpu_h"](ones),
            late_waiting_gpu_h=totals["late_waiting_gpu_h"](ones),
            undrained=int((mask & ~drained).sum()),
        ))
    return tuple(found)


# A job whose queue time changes by less than this is not affected: sacct records whole seconds.
_AFFECTED_S = 1.0


@dataclass(frozen=True)
class TierChange:
    """One tier's waiting in a scenario against no preemption, per job: the jobs whose queue time (first wait and
    waits to restart) changed, and their extra queue time per job (negative: they waited less). Jobs that cannot
    drain in either replay are left out and counted."""

    tier: str
    affected: int
    extra_wait_mean_s: float | None
    extra_wait_p50_s: float | None
    undrained: int


def _moved(base: JobTable, other: JobTable, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each job's extra queue time under `other` against `base`, and which of `mask`'s jobs it affects (drained in
    both, changed by _AFFECTED_S or more)."""
    extra = other.waiting_s - base.waiting_s
    return extra, mask & base.drained() & other.drained() & (np.abs(extra) >= _AFFECTED_S)


def tier_changes(base: JobTable, other: JobTable) -> tuple[TierChange, ...]:
    """Per tier and over all ('all'), the jobs `other` makes wait more or less than `base` (no preemption)."""
    both = base.drained() & other.drained()
    found = []
    for name, mask in _tier_masks(base):
        extra, affected = _moved(base, other, mask)
        moved = extra[affected]
        found.append(TierChange(
            tier=name, affected=int(moved.size),
            extra_wait_mean_s=float(moved.mean()) if moved.size else None,
            extra_wait_p50_s=float(np.median(moved)) if moved.size else None,
            undrained=int((mask & ~both).sum()),
        ))
    return tuple(found)


def net_per_job(base: JobTable, other: JobTable, weights: Mapping[str, float]) -> np.ndarray:
    """Each job's tier-weighted GPU-seconds of time-to-result gained by `other` against `base` (no
    preemption): queue time saved, less work thrown away (the victim redoes it, so it reaches its result
    later by as much). A job that cannot drain in either replay counts 0: its queue time has no end."""
    w = np.array([weights[t] for t in TIERS])[base.tier]
    both = base.drained() & other.drained()
    return both * w * (base.gpus * (base.waiting_s - other.waiting_s) - (other.thrown_gpu_s - base.thrown_gpu_s))


# From this many days on, the bootstrap resamples whole submission days (a day's jobs share its load); a shorter
# window is cut into _SHORT_BLOCKS equal stretches instead: over one day, resampling days makes every replicate a
# whole multiple of the net, an interval of [0, 3 x net] whatever the data. Where fewer than _MIN_BLOCKS
# stretches hold jobs (a burst of submissions), the same degeneracy returns, so the jobs are resampled one by one.
_MIN_DAYS = 7
_SHORT_BLOCKS = 24
_MIN_BLOCKS = 8


@dataclass(frozen=True)
class Blocks:
    """What the bootstrap resamples: each job's block, and what a block is, in words."""

    of_job: np.ndarray
    unit: str


def resampling_blocks(table: JobTable, window_s: float) -> Blocks:
    """The block of each job the bootstrap resamples: its submission day; in a window under _MIN_DAYS days, its
    stretch of the window (one of _SHORT_BLOCKS); where too few stretches hold jobs, the job itself."""
    days = np.unique(table.day).size
    if table.submit_s is None or window_s >= _MIN_DAYS * _DAY_S:
        return Blocks(table.day, f"{plural(days, 'submission day')}")
    width = max(window_s / _SHORT_BLOCKS, 1.0)
    stretches = np.floor(np.clip(table.submit_s, 0.0, None) / width).astype(np.int64)
    held = np.unique(stretches).size
    if held >= _MIN_BLOCKS:
        return Blocks(stretches, f"{held} stretches of {duration(width)} by submission time")
    return Blocks(np.arange(table.submit_s.size, dtype=np.int64),
                  f"{plural(int(table.submit_s.size), 'job')} one by one, their submissions falling in only {held} of "
                  f"{_SHORT_BLOCKS} stretches of the window")


def bootstrap_interval(per_job: np.ndarray, blocks: np.ndarray, samples: int, confidence: float
                       ) -> tuple[float | None, float | None]:
    """Percentile interval of the sum over jobs, resampling blocks (resampling_blocks) with Poisson(1) weights.

    With `per_job` of several rows (the same figure per job over several replays: the plain one first, then
    those with jittered inputs and event order, jobs in the same order), replicate b sums row b mod rows: the
    interval then covers the replay's sensitivity as well as the sample. It always holds the first row's sum
    (the figure shown)."""
    rows = np.atleast_2d(per_job)
    if rows.shape[1] == 0:
        return None, None
    index, weights = _block_weights(blocks, samples)
    by_block = np.stack([np.bincount(index, weights=row, minlength=weights.shape[1]) for row in rows])
    reps = (weights * by_block[np.arange(samples) % rows.shape[0]]).sum(axis=1)
    return _percentiles(reps, float(rows[0].sum()), confidence)


def _block_weights(blocks: np.ndarray, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Each job's index into its block, and every replicate's Poisson(1) weight per block (samples x blocks),
    drawn from the fixed seed: the one resampling behind every counterfactual interval."""
    uniq, index = np.unique(blocks, return_inverse=True)
    return index, np.random.default_rng(_SEED).poisson(1.0, size=(samples, uniq.size))


def _percentiles(reps: np.ndarray, shown: float, confidence: float) -> tuple[float, float]:
    """The replicates' percentile interval, widened to hold the figure shown."""
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(reps, [alpha, 1.0 - alpha])
    return min(float(low), shown), max(float(high), shown)


def bootstrap_figure(rows: Sequence[Any], blocks: np.ndarray, samples: int, confidence: float,
                     figure: Callable[[Any, np.ndarray], float | None]) -> tuple[float | None, float | None]:
    """The interval of a figure that is not a plain sum over jobs (a count, mean or median over the jobs a replay
    selects), made as bootstrap_interval makes the net's: the same blocks and Poisson weights, replicate b read
    on replay b mod rows (the plain replay first, then the jittered ones). `figure(row, job_weights)` gives the
    figure with each job counted job_weights times (all ones: the figure shown), or None where it is not
    defined (no job selected). Unknown (None, None) where the figure shown is not defined, or more replicates
    than one tail of the interval do not define it (too few blocks hold the jobs it is read on)."""
    jobs = blocks.size
    shown = figure(rows[0], np.ones(jobs)) if jobs and rows else None
    if shown is None:
        return None, None
    index, weights = _block_weights(blocks, samples)
    found = [figure(rows[b % len(rows)], weights[b][index]) for b in range(samples)]
    reps = np.array([r for r in found if r is not None])
    if samples - reps.size > (1.0 - confidence) / 2.0 * samples:
        return None, None
    return _percentiles(reps, shown, confidence)


def _pairs(none: Scenario, other: Scenario) -> list[tuple[JobTable, JobTable]]:
    """The plain replays of `none` and `other`, then their jittered ones paired seed by seed."""
    return [(none.table, other.table), *zip(none.draws, other.draws, strict=True)]


def net_rows(none: Scenario, other: Scenario, weights: Mapping[str, float]) -> np.ndarray:
    """The net per job of `other` against `none` (net_per_job), over the plain replay and then each jittered
    one, paired seed by seed: one row per replay."""
    return np.stack([net_per_job(a, b, weights) for a, b in _pairs(none, other)])


def net_interval(none: Scenario, other: Scenario, weights: Mapping[str, float], samples: int, confidence: float,
                 window_s: float) -> tuple[float | None, float | None]:
    """The interval of `other`'s net against no preemption, in tier-weighted GPU-seconds: the bootstrap over
    blocks of jobs combined with the jittered replays (bootstrap_interval)."""
    return bootstrap_interval(net_rows(none, other, weights), resampling_blocks(none.table, window_s).of_job,
                              samples, confidence)


Interval = tuple[float | None, float | None]


def _weighted_median(values: np.ndarray, counts: np.ndarray) -> float | None:
    # Poisson weights are whole counts: the median of each value repeated that many times
    kept = np.repeat(values, counts.astype(np.int64))
    return float(np.median(kept)) if kept.size else None


@dataclass(frozen=True)
class _Ranked:
    """A figure's values over the jobs it is read on, in ascending order, and each value's job: what a quantile
    of them with each job counted its bootstrap weight is read from without sorting again."""

    values: np.ndarray
    jobs: np.ndarray

    @staticmethod
    def of(values: np.ndarray, mask: np.ndarray) -> _Ranked:
        jobs = np.flatnonzero(mask & ~np.isnan(values))
        order = np.argsort(values[jobs], kind="stable")
        return _Ranked(values[jobs][order], jobs[order])

    def quantile(self, w: np.ndarray, q: float) -> float | None:
        """The q-quantile of the values with job j counted w[j] times (linear between the closest ranks, as
        _quantile reads the figure shown, which all-ones weights give exactly)."""
        counts = w[self.jobs]
        if counts.size and np.all(counts == 1.0):
            return _quantile(self.values, q)
        cum = np.cumsum(counts)
        total = round(float(cum[-1])) if cum.size else 0
        if total == 0:
            return None
        rank = q * (total - 1)
        k = math.floor(rank)
        a = self.values[np.searchsorted(cum, k, side="right")]
        b = self.values[np.searchsorted(cum, min(k + 1, total - 1), side="right")]
        return float(a + (rank - k) * (b - a))


Reading = Callable[[np.ndarray], float | None]


def _own_figures(table: JobTable, mask: np.ndarray
                 ) -> tuple[dict[str, Reading], dict[str, Callable[[np.ndarray], float]]]:
    """A replay's per-tier figures, each read with every job counted its weight (all ones: the figure
    tier_figures stores): the quantiles of the jobs' waits, then the GPU-hour totals."""
    drained = table.drained()
    late = np.zeros(table.tier.size) if table.late_waiting_s is None else table.late_waiting_s
    started = _Ranked.of(table.first_wait_s, mask)
    completion = _Ranked.of(table.completion_s, mask)
    sums = {
        "thrown_away_gpu_h": np.where(mask, table.thrown_gpu_s, 0.0),
        "victim_waiting_gpu_h": np.where(mask, table.victim_waiting_gpu_s, 0.0),
        "waiting_gpu_h": _queued_gpu_s(table, mask),
        "late_waiting_gpu_h": np.where(mask & drained, table.gpus * late, 0.0),
        "busy_gpu_h": np.where(mask, table.busy_gpu_s, 0.0),
    }

    def total(per_job: np.ndarray) -> Callable[[np.ndarray], float]:
        return lambda w: float((w * per_job).sum()) / 3600.0

    quantiles: dict[str, Reading] = {
        "wait_p50_s": lambda w: started.quantile(w, 0.5),
        "wait_p90_s": lambda w: started.quantile(w, 0.9),
        "completion_p50_s": lambda w: completion.quantile(w, 0.5),
    }
    return quantiles, {name: total(per_job) for name, per_job in sums.items()}


def _paired_figures(base: JobTable, other: JobTable, mask: np.ndarray
                    ) -> dict[str, Reading]:
    """`other`'s per-tier changes against `base` (tier_changes), each read with every job counted its weight."""
    extra, moved = _moved(base, other, mask)

    def mean(w: np.ndarray) -> float | None:
        n = float(w[moved].sum())
        return float((w * extra)[moved].sum()) / n if n else None

    return {
        "affected_jobs": lambda w: float(w[moved].sum()),
        "extra_wait_mean_s": mean,
        "extra_wait_p50_s": lambda w: _weighted_median(extra[moved], w[moved]),
    }


def figure_intervals(none: Scenario, other: Scenario, samples: int, confidence: float, window_s: float
                     ) -> dict[str, dict[str, Interval]]:
    """Per tier and over all, the interval of each per-tier figure of `other` (stored in counterfactual_figures;
    for `other` = `none`, its own figures only), keyed by the figure's column: the bootstrap over blocks of jobs
    combined with the jittered replays, as the net's (bootstrap_figure)."""
    own = [other.table, *other.draws]
    pairs = _pairs(none, other) if other is not none else []
    blocks = resampling_blocks(none.table, window_s).of_job
    found: dict[str, dict[str, Interval]] = {}
    for name, mask in _tier_masks(none.table):
        # Each replay's per-job arrays are made once; the `samples` replicates of each figure only reweigh them.
        rows: list[dict[str, Reading]] = [{**q, **t} for q, t in (_own_figures(table, mask) for table in own)]
        rows = [{**r, **_paired_figures(*pair, mask)} for r, pair in zip(rows, pairs, strict=True)] if pairs else rows
        found[name] = {column: bootstrap_figure([row[column] for row in rows], blocks, samples, confidence,
                                                _read_weighted)
                       for column in rows[0]}
    return found


def _read_weighted(figure: Callable[[np.ndarray], float | None], w: np.ndarray) -> float | None:
    return figure(w)


def term_intervals(none: Scenario, other: Scenario, samples: int, confidence: float, window_s: float
                   ) -> tuple[Interval, Interval, Interval]:
    """The intervals of the headline's three terms for `other` against no preemption, GPU-hours: critical+high
    queue time saved, work thrown away, lower-tier queue time added. Each is a sum over jobs, so each is made as
    the net's (bootstrap_interval: the same blocks, weights and pairing of the jittered replays)."""
    upper = np.isin(none.table.tier, [TIERS.index(t) for t in HIGH])
    rows: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for base, changed in _pairs(none, other):
        rows[0].append(_queued_gpu_s(base, upper) - _queued_gpu_s(changed, upper))
        rows[1].append(changed.thrown_gpu_s - base.thrown_gpu_s)
        rows[2].append(_queued_gpu_s(changed, ~upper) - _queued_gpu_s(base, ~upper))
    blocks = resampling_blocks(none.table, window_s).of_job
    found = []
    for per_job in rows:
        low, high = bootstrap_interval(np.stack(per_job), blocks, samples, confidence)
        found.append((None if low is None else low / 3600.0, None if high is None else high / 3600.0))
    return found[0], found[1], found[2]


def interval_covers(none: Scenario, window_s: float, confidence: float) -> str:
    """What the nets' intervals cover, in one sentence (stored beside them, shown with the net)."""
    replays = (f"and the replay's sensitivity over {plural(len(none.draws), 'more replay')} with inputs drawn "
               "within their measurement error and the order of simultaneous events shuffled"
               if none.draws else "but not the replay's own sensitivity (tuning.jitter_replays = 0)")
    return (f"{100 * confidence:.0f}% interval over a bootstrap of "
            f"{resampling_blocks(none.table, window_s).unit} {replays}")


@dataclass(frozen=True)
class Breakeven:
    """The multiple of the critical and high tiers' weights at which a scenario's net against no preemption
    is zero, holding the normal and low weights: `kind` factor (with `factor`), never (the upper tiers gain
    nothing), always (the lower tiers lose nothing) or unknown."""

    kind: str
    factor: float | None = None


def breakeven(base: JobTable, other: JobTable, weights: Mapping[str, float]) -> Breakeven:
    per_job = net_per_job(base, other, weights)
    upper = np.isin(base.tier, [TIERS.index(t) for t in HIGH])
    gain, rest = float(per_job[upper].sum()), float(per_job[~upper].sum())
    if gain <= 0:
        # the upper tiers gain nothing: no weight on their work makes it pay
        return Breakeven("never")
    if rest >= 0:
        return Breakeven("always")
    return Breakeven("factor", -rest / gain)


@dataclass(frozen=True)
class Scenario:
    key: str
    label: str
    policy: Mapping[str, Any]
    trigger_wait_s: float | None
    table: JobTable
    figures: tuple[TierFigures, ...]
    # Allocated GPU-seconds per UTC hour (hourly_allocated), kept for the plain queue (scenario none) only.
    hours: np.ndarray | None = None
    # The scenario replayed again with jittered inputs and event order (seeds 1, 2, ...), jobs in the workload's
    # order: paired seed by seed with every other scenario's draws (net_rows).
    draws: tuple[JobTable, ...] = ()


def _policy_json(variant: Variant) -> dict[str, Any]:
    p = variant.policy
    found: dict[str, Any] = {
        "enabled": p.enabled, "min_run_s": p.min_run_s, "grace_s": p.grace_s, "requeue_hold_s": p.requeue_hold_s,
        "victim_order": p.victim_order, "trigger_wait_s": p.trigger_wait_s,
        "may_preempt": {k: list(v) for k, v in p.may_preempt.items()},
    }
    if variant.protect_near_completion is not None:
        found["protect_near_completion"] = variant.protect_near_completion
    if p.protection is not None:
        found["protection"] = asdict(p.protection)
    if variant.job_changes:
        found["jobs_changed"] = len(variant.job_changes)
    return found


def run_scenario(workload: Workload, key: str, label: str, variant: Variant) -> tuple[Scenario, Figures]:
    """One scenario replayed: its per-job table and per-tier figures, and the replay's Figures (what the
    validation against the ledger compares)."""
    start = workload.window.start.timestamp()
    with paused_gc():
        # Drained: the jobs of the window run to completion, so no waiting is cut at its end. What is compared
        # with the ledger (Figures) and the hours a busy hour is counted in are the same replay up to the
        # window's end.
        out = replay_outcome(workload, variant, drain=True)
        table = job_table(out, start % _DAY_S, workload.horizon_s)
        view = window_view(out, workload.horizon_s)
        figures = outcome_figures(view, workload.warmup_measured, workload.resolution_s)
        hours = hourly_allocated(view, start % 3600.0) if key == "none" else None
        del out, view  # dropped inside the pause: the collector never scans it
    trigger = variant.policy.trigger_wait_s if key.startswith("trigger") else None
    return Scenario(key, label, _policy_json(variant), trigger, table, tier_figures(table), hours), figures


def run_draw(workload: Workload, variant: Variant) -> JobTable:
    """One jittered replay of a scenario (`variant.jitter` set): its per-job table, jobs in the workload's order
    (the engine ran them shuffled: replay.event_order)."""
    with paused_gc():
        out = replay_outcome(workload, variant, drain=True)  # drained as its scenario is (run_scenario)
        table = job_table(out, workload.window.start.timestamp() % _DAY_S, workload.horizon_s)
        position = {j.job_id: i for i, j in enumerate(workload.jobs)}
        order = np.argsort([position[j.job_id] for j in out.jobs])
        del out
    return replace(table, **{f.name: getattr(table, f.name)[order] for f in fields(JobTable)
                             if getattr(table, f.name) is not None})


# The workload the worker processes replay: set before they fork, so it is inherited instead of pickled.
_SHARED: list[Workload] = []


def _run_shared(item: tuple[str, str, Variant]) -> tuple[Scenario, Figures] | JobTable:
    return _run_one(_SHARED[0], item)


def _plain(value: Any) -> Any:
    """`value` as JSON can hold it: dataclasses and mappings as objects, sequences as lists."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_plain(v) for v in (sorted(value) if isinstance(value, (set, frozenset)) else value)]
    return value


def replay_key(variant: Variant) -> str:
    """What decides a scenario's replay of a workload, as a key: the variant's policy, changed jobs, protected
    share and jitter seed, not its label (scenarios of different names can be one replay)."""
    return json.dumps(_plain(replace(variant, label="")), sort_keys=True)


# Per workload (by identity, while it lives), its drained replays already run in this process, by replay_key:
# a scenario's plain replay (its Scenario, under the name it was first run as, and Figures) or a jittered one's
# JobTable. `analyze` and `suggest` ask for the same scenario more than once (no preemption as the base of every
# net, suggest's best change again for the counterfactual): each is replayed once.
_REPLAYED: dict[int, dict[str, tuple[Scenario, Figures] | JobTable]] = {}


def _replayed(workload: Workload) -> dict[str, tuple[Scenario, Figures] | JobTable]:
    found = _REPLAYED.get(id(workload))
    if found is None:
        found = _REPLAYED[id(workload)] = {}
        weakref.finalize(workload, _REPLAYED.pop, id(workload), None)
    return found


def _named(done: tuple[Scenario, Figures], key: str, label: str, variant: Variant) -> tuple[Scenario, Figures]:
    """A plain replay under the scenario name it is asked for (run_scenario's: the hours kept for `none` only)."""
    scenario, figures = done
    trigger = variant.policy.trigger_wait_s if key.startswith("trigger") else None
    return replace(scenario, key=key, label=label, trigger_wait_s=trigger,
                   hours=scenario.hours if key == "none" else None), figures


def run_scenarios(workload: Workload, items: Sequence[tuple[str, str, Variant]], processes: int | None,
                  draws: int = 0) -> list[tuple[Scenario, Figures]]:
    """Every scenario, and `draws` jittered replays of each (Scenario.draws), in parallel across the cores when
    there are several (as replay.sweep does). A replay this process has run on the workload already
    (replay_key) is not run again, nor one asked for twice."""
    every = [(k, t, v) for k, t, v in items]
    every += [(k, t, replace(v, jitter=seed)) for k, t, v in items for seed in range(1, draws + 1)]
    keys = [replay_key(v) for _, _, v in every]
    replayed = _replayed(workload)
    missing: dict[str, tuple[str, str, Variant]] = {}
    for item, key in zip(every, keys, strict=True):
        known = replayed.get(key)
        # the plain `none` replay carries the hours (run_scenario): one run under another name has none
        if known is None or (item[0] == "none" and isinstance(known, tuple) and known[0].hours is None):
            if key not in missing or item[0] == "none":
                missing[key] = item
    todo = list(missing.items())
    workers = min(len(todo), processes or os.cpu_count() or 1)
    if workers <= 1:
        done = [_run_one(workload, item) for _, item in todo]
    else:
        _SHARED[:] = [workload]
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
                done = list(pool.map(_run_shared, [(k, t, picklable(v)) for _, (k, t, v) in todo]))
        finally:
            _SHARED.clear()
    replayed.update((key, result) for (key, _), result in zip(todo, done, strict=True))
    found = [replayed[key] for key in keys]
    plain = [_named(d, k, t, v) for d, (k, t, v) in zip(found[:len(items)], items, strict=True)
             if isinstance(d, tuple)]
    tables = [d for d in found[len(items):] if isinstance(d, JobTable)]
    return [(replace(scenario, draws=tuple(tables[i * draws:(i + 1) * draws])), figures)
            for i, (scenario, figures) in enumerate(plain)]


def _run_one(workload: Workload, item: tuple[str, str, Variant]) -> tuple[Scenario, Figures] | JobTable:
    return run_scenario(workload, *item) if item[2].jitter is None else run_draw(workload, item[2])


# The action each scheduler model lets preemptlens take (analytics/actions.py); the generic model holds as KAI's
# non-preemptible PodGroup does.
ACTION_OF = {"slurm": "slurm_protect", "kueue": "kueue_boost", "kai": "kai_protect", "generic": "kai_protect"}
BOUND_LABEL = ("if the scheduler could choose: victims by least live cost (a bound; no scheduler offers it, "
               "never the fix)")


def applicable_protection(scheduler: str, cycle_s: float = DEFAULT_CYCLE_S) -> Protection:
    """The action preemptlens can take on this scheduler model, at its default settings."""
    return ACTIONS[ACTION_OF.get(scheduler, "kai_protect")]().replayed(cycle_s)


def best_variant(workload: Workload, suggested: Variant | None) -> tuple[str, Variant]:
    """(d): suggest's first replayed change, as it acts; without one, the applicable action at its defaults."""
    if suggested is not None:
        return suggested.label, replace(suggested, label="best")
    policy = preemption_policy(workload)
    protection = applicable_protection(policy.scheduler)
    return (f"today's policy with preemptlens's {ACTIONS[protection.action].title} at its default settings (run "
            "preemptlens suggest for the best change)", Variant("best", replace(policy, protection=protection)))


def bound_variant(workload: Workload) -> Variant:
    """(e): today's policy with victims chosen by least live cost: a bound, not a fix."""
    return Variant("bound", replace(preemption_policy(workload), victim_order="cost"))


Net = tuple[float, float | None, float | None]


def nets(workload: Workload, variants: Sequence[Variant], weights: Mapping[str, float], samples: int,
         confidence: float, processes: int | None = None, draws: int = 0, stored: Mapping[str, Net] | None = None
         ) -> list[Net]:
    """Each variant's tier-weighted net against no preemption, GPU-hours, with its interval (as the headline's:
    net_interval, over `draws` jittered replays too). A variant whose net `stored` holds (stored_nets: by
    replay_key, made at the same weights, samples, confidence and draws) is read from it, not replayed."""
    stored = stored or {}
    keys = [replay_key(v) for v in variants]
    items = [("none", "", Variant("none", replace(workload.actual.policy, enabled=False)))]
    items += [(f"v{k}", v.label, v) for k, (v, key) in enumerate(zip(variants, keys, strict=True))
              if key not in stored]
    replayed: dict[str, Net] = dict(stored)
    if len(items) > 1:
        (none, _), *results = run_scenarios(workload, items, processes, draws)
        for (scenario, _), (_, _, variant) in zip(results, items[1:], strict=True):
            per_job = net_per_job(none.table, scenario.table, weights)
            low, high = net_interval(none, scenario, weights, samples, confidence, workload.window.seconds)
            replayed[replay_key(variant)] = (float(per_job.sum()) / 3600.0, None if low is None else low / 3600.0,
                                             None if high is None else high / 3600.0)
    return [replayed[key] for key in keys]


def stored_nets(wh: Warehouse, workload: Workload, params: AnalyticsSettings, tuning: TuningSettings,
                weights: Mapping[str, float], samples: int, confidence: float) -> dict[str, Net]:
    """The nets `analyze` stored for the workload's window, by replay_key, of the scenarios the settings decide
    (all but `best`, which suggest replaces): what `nets` need not replay again at these weights, samples and
    confidence. Empty unless the stored counterfactual is of the same rows, settings (its fingerprint) and window,
    made at the same weights, samples and confidence."""
    cluster = workload.window.cluster
    run = wh.con.execute("SELECT window_start, window_end, fingerprint, tier_weights FROM counterfactual_runs "
                         "WHERE cluster = $c", {"c": cluster}).fetchall()
    if (not run or (run[0][0], run[0][1]) != (workload.window.start, workload.window.end)
            or json.loads(run[0][3]) != dict(weights) or dict(weights) != dict(params.tier_weights)
            or (samples, confidence) != (params.readiness_bootstrap_samples, params.readiness_confidence)
            or run[0][2] != fingerprint(wh, cluster, _settings(params, tuning))):
        return {}
    rows = wh.con.execute("SELECT scenario, net_value, net_low, net_high FROM counterfactual_scenarios "
                          "WHERE cluster = $c", {"c": cluster}).fetchall()
    found = {r[0]: (float(r[1]), r[2], r[3]) for r in rows}
    return {replay_key(v): found[key] for key, _, v in scenario_variants(workload, params)
            if key != "best" and key in found}


# -- storage -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Headline:
    """Today's policy against no preemption, in GPU-hours."""

    saved_high_gpu_h: float
    thrown_away_gpu_h: float
    lower_added_gpu_h: float
    net_value: float
    net_low: float | None
    net_high: float | None
    breakeven: Breakeven
    # The window's capacity, GPUs x hours: what the queue GPU-hours are read against (they can exceed it).
    capacity_gpu_h: float | None = None
    # The scenario weighed against no preemption ('today', or 'on' where the cluster does not preempt).
    scenario: str = "today"
    # The intervals of saved_high_gpu_h, thrown_away_gpu_h and lower_added_gpu_h, in that order (term_intervals).
    terms: tuple[Interval, Interval, Interval] = ((None, None), (None, None), (None, None))


def headline(none: Scenario, today: Scenario, weights: Mapping[str, float], samples: int, confidence: float,
             window_s: float, gpus: int | None = None) -> Headline:
    by = {f.tier: f for f in today.figures}
    base = {f.tier: f for f in none.figures}
    saved = sum(base[t].waiting_gpu_h - by[t].waiting_gpu_h for t in HIGH)
    added = sum(by[t].waiting_gpu_h - base[t].waiting_gpu_h for t in LOWER)
    per_job = net_per_job(none.table, today.table, weights)
    low, high = net_interval(none, today, weights, samples, confidence, window_s)
    return Headline(
        saved_high_gpu_h=saved,
        thrown_away_gpu_h=by["all"].thrown_away_gpu_h - base["all"].thrown_away_gpu_h,
        lower_added_gpu_h=added,
        net_value=float(per_job.sum()) / 3600.0,
        net_low=None if low is None else low / 3600.0,
        net_high=None if high is None else high / 3600.0,
        breakeven=breakeven(none.table, today.table, weights),
        capacity_gpu_h=None if gpus is None else gpus * window_s / 3600.0,
        scenario=today.key,
        terms=term_intervals(none, today, samples, confidence, window_s),
    )


# -- sweeps --------------------------------------------------------------------------------------

_TERMS = ("critical+high queue time saved", "lower-tier queue time saved", "work thrown away avoided")


def _terms(base: JobTable, other: JobTable, weights: Mapping[str, float]) -> np.ndarray:
    """`other`'s net against `base` split in its three terms, tier-weighted GPU-hours (they sum to the net)."""
    w = np.array([weights[t] for t in TIERS])[base.tier]
    upper = np.isin(base.tier, [TIERS.index(t) for t in HIGH])
    queue = w * base.gpus * (base.waiting_s - other.waiting_s)
    return np.array([queue[upper].sum(), queue[~upper].sum(),
                     -(w * (other.thrown_gpu_s - base.thrown_gpu_s)).sum()]) / 3600.0


def _step_why(before: Scenario, after: Scenario, step: np.ndarray, none: Scenario,
              weights: Mapping[str, float]) -> str:
    """Why a step between two scenarios goes the way it does: within the replay's own sensitivity when its
    jittered replays give it both signs, else the term that moves it."""
    if step.size == 1:
        return ("the replay was not jittered (tuning.jitter_replays = 0), so the step cannot be told from the "
                "replay's own sensitivity")
    spread = f"{change(float(step.min()), GPU_H)} to {change(float(step.max()), GPU_H)}"
    if step.min() <= 0 <= step.max():
        return (f"the step is within the replay's own sensitivity: over {step.size} replays with jittered inputs "
                f"and event order it takes both signs ({spread})")
    moved = _terms(none.table, after.table, weights) - _terms(none.table, before.table, weights)
    k = int(np.argmax(np.abs(moved) * (np.sign(moved) == np.sign(step[0]))))
    return (f"the step holds on every one of {step.size} replays ({spread}); it comes from "
            f"{_TERMS[k]} ({change(float(moved[k]), GPU_H)}, preemptions {int(before.table.preemptions.sum()):,} "
            f"-> {int(after.table.preemptions.sum()):,})")


def sweep_notes(none: Scenario, base: Scenario, scenarios: Sequence[Scenario], weights: Mapping[str, float]
                ) -> dict[str, str]:
    """The sweeps whose net is not monotone, each with a sentence that says so and why: 'trigger' (the net over
    the trigger thresholds, in order) and 'victim_order' (the best alternative's victim order against `base`'s,
    when its net moves otherwise than its work thrown away: the order is meant to cut that, so a net that moves
    through queue time instead is no effect of the order alone). Nets per replay, paired seed by seed."""
    notes: dict[str, str] = {}
    triggers = sorted((s for s in scenarios if s.trigger_wait_s is not None), key=lambda s: s.trigger_wait_s or 0.0)
    if len(triggers) >= 3:
        nets = np.stack([net_rows(none, t, weights).sum(axis=1) for t in triggers]) / 3600.0
        steps = np.diff(nets, axis=0)  # thresholds x replays
        point = steps[:, 0]
        if (point > 0).any() and (point < 0).any():
            trend = np.sign(nets[-1, 0] - nets[0, 0]) or np.sign(point[np.argmax(np.abs(point))])
            against = [i for i in range(point.size) if np.sign(point[i]) == -trend]
            parts = [f"from {duration(triggers[i].trigger_wait_s)} to {duration(triggers[i + 1].trigger_wait_s)} "
                     f"it {'rises' if point[i] > 0 else 'falls'} by {significant(abs(float(point[i])))} GPU-h: "
                     + _step_why(triggers[i], triggers[i + 1], steps[i], none, weights) for i in against]
            robust = any(steps[i].size > 1 and not steps[i].min() <= 0 <= steps[i].max() for i in against)
            notes["trigger"] = (
                f"the trigger sweep is not monotone: its net {'rises' if trend > 0 else 'falls'} from "
                f"{change(float(nets[0, 0]), GPU_H)} at {duration(triggers[0].trigger_wait_s)} to "
                f"{change(float(nets[-1, 0]), GPU_H)} at {duration(triggers[-1].trigger_wait_s)}, but "
                + "; ".join(parts)
                + (". A preemption made or not made at one threshold changes which jobs wait behind which at the "
                   "next, so the net need not follow the threshold" if robust else ""))
    best = next((s for s in scenarios if s.key == "best"), None)
    if best is not None:
        moved = _terms(none.table, best.table, weights) - _terms(none.table, base.table, weights)
        step = (net_rows(none, best, weights).sum(axis=1) - net_rows(none, base, weights).sum(axis=1)) / 3600.0
        queue = float(moved[0] + moved[1])
        if abs(queue) > abs(float(moved[2])) and step[0]:
            notes["victim_order"] = (
                f"{best.label} moves the net by {change(float(step[0]), GPU_H)} against {base.label}, more through "
                f"queue time (critical+high {change(float(moved[0]), GPU_H)}, lower tiers "
                f"{change(float(moved[1]), GPU_H)}) than through work thrown away ({change(float(moved[2]), GPU_H)}), "
                "which is what a victim order acts on: other victims restart at other times and change who waits "
                "behind whom; " + _step_why(base, best, step, none, weights))
    return notes


def fingerprint(wh: Warehouse, cluster: str, settings: Mapping[str, Any]) -> str:
    """What the counterfactual depends on: the cluster's raw rows (which load wrote each), its hoarding
    stretches, and the settings; the same fingerprint needs no new replay."""
    parts = [json.dumps(settings, sort_keys=True, default=str)]
    for table in ("jobs", "job_runs", "checkpoints", "pools", "preemption_links"):
        row = wh.con.execute(
            f"SELECT count(*), coalesce(bit_xor(hash(_load_id)), 0) FROM {table} WHERE cluster = $c",  # noqa: S608
            {"c": cluster},
        ).fetchall()[0]
        parts.append(f"{table}:{row[0]}:{row[1]}")
    stretches = wh.con.execute(
        "SELECT count(*), coalesce(sum(idle_s), 0) FROM hoarding_stretches WHERE cluster = $c", {"c": cluster}
    ).fetchall()[0]
    parts.append(f"hoarding:{stretches[0]}:{stretches[1]}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _clusters(wh: Warehouse) -> list[str]:
    return [r[0] for r in wh.con.execute("SELECT DISTINCT cluster FROM jobs ORDER BY cluster").fetchall()]


def _settings(params: AnalyticsSettings, tuning: TuningSettings) -> dict[str, Any]:
    """The settings a stored counterfactual depends on (its fingerprint holds them)."""
    return {"weights": params.tier_weights, "triggers": params.trigger_wait_candidates_s,
            "samples": params.readiness_bootstrap_samples, "confidence": params.readiness_confidence,
            "tuning": asdict(tuning),
            # how the intervals are made: a change replays what an earlier build stored (issue 31.5)
            "interval": "bootstrap over blocks + jittered replays"}


def refresh(wh: Warehouse, params: AnalyticsSettings, tuning: TuningSettings) -> dict[str, str]:
    """Replay each cluster whose inputs changed since the last refresh and store the counterfactual; returns
    per cluster what was done (replayed in N s, unchanged, or why there is no counterfactual)."""
    done: dict[str, str] = {}
    present = {r[0] for r in wh.con.execute("SELECT cluster FROM counterfactual_runs").fetchall()}
    for cluster in _clusters(wh):
        mark = fingerprint(wh, cluster, _settings(params, tuning))
        stored = wh.con.execute("SELECT fingerprint FROM counterfactual_runs WHERE cluster = $c",
                                {"c": cluster}).fetchall()
        if stored and stored[0][0] == mark:
            done[cluster] = "unchanged"
            continue
        began = time.perf_counter()
        try:
            window = default_window(wh, cluster)
            workload = load_workload(wh, window, tuning)
            computed = compute(wh, workload, params, tuning.validation_tolerance,
                               processes=tuning.processes or None, draws=tuning.jitter_replays)
        except PreemptlensError as exc:
            # No counterfactual (no pools, no runs): the verdict reads it as unknown, with this reason.
            _forget(wh, cluster)
            done[cluster] = f"no counterfactual: {exc.message}"
            log.info("counterfactual of %s: %s", cluster, exc.message)
            continue
        store(wh, computed, mark)
        done[cluster] = f"replayed in {time.perf_counter() - began:.1f} s"
    for gone in present - set(_clusters(wh)):
        _forget(wh, gone)
    return done


@dataclass(frozen=True)
class Computed:
    window: Window
    jobs: int
    validation: Validation
    scenarios: tuple[Scenario, ...]
    headline: Headline
    weights: Mapping[str, float]
    notes: tuple[str, ...]
    samples: int
    confidence: float
    # What the nets' intervals cover (interval_covers), and the sweeps that are not monotone (sweep_notes).
    covers: str = ""
    sweeps: Mapping[str, str] = field(default_factory=dict)


def compute(wh: Warehouse, workload: Workload, params: AnalyticsSettings, tolerance: float,
            suggested: Variant | None = None, processes: int | None = None, draws: int = 0) -> Computed:
    """Replay the workload under (a)-(d), each again with `draws` jittered replays (tuning.jitter_replays), and
    measure the replay under today's policy against the ledger."""
    actual = workload.actual.policy
    variants = scenario_variants(workload, params, suggested)
    notes = list(workload.notes)
    if not actual.enabled:
        notes.append("this cluster does not preempt today: the headline is preemption turned on against today's "
                     "plain queueing")
    results = run_scenarios(workload, variants, processes, draws)
    scenarios = [scenario for scenario, _ in results]
    # every other scenario tells which figures decide between policies (the same under all of them is no check)
    checked = validation(wh, workload, results[1][1], [f for k, (_, f) in enumerate(results) if k != 1], tolerance)
    weights = dict(params.tier_weights)
    base = scenarios[1] if actual.enabled else scenarios[2]
    head = headline(scenarios[0], base, weights,
                    params.readiness_bootstrap_samples, params.readiness_confidence, workload.window.seconds,
                    sum(p.gpus for p in workload.pools))
    covers = interval_covers(scenarios[0], workload.window.seconds, params.readiness_confidence)
    return Computed(workload.window, len(workload.jobs), checked, tuple(scenarios), head, weights,
                    tuple(notes), params.readiness_bootstrap_samples, params.readiness_confidence, covers,
                    sweep_notes(scenarios[0], base, scenarios, weights))


def scenario_variants(workload: Workload, params: AnalyticsSettings, suggested: Variant | None = None
                      ) -> list[tuple[str, str, Variant]]:
    """The scenarios (a)-(e) compute replays, each as (key, label, variant)."""
    actual = workload.actual.policy
    preempting = preemption_policy(workload)
    variants: list[tuple[str, str, Variant]] = [
        ("none", "no preemption (plain queueing)", Variant("none", replace(actual, enabled=False))),
        ("today", "today's policy", Variant("today", actual)),
    ]
    base_label = "today's policy" if actual.enabled else "preemption turned on"
    if not actual.enabled:
        # A cluster that does not preempt asks whether to turn it on: the headline weighs the preemption its
        # tiers would get (may_preempt as the queue orders them, or [tuning] may_preempt) against today's.
        variants.append(("on", "preemption turned on (" + ", ".join(
            f"{t} evicts {'/'.join(v)}" for t, v in preempting.may_preempt.items() if v) + ")",
            Variant("on", preempting)))
    for t in sorted({float(x) for x in params.trigger_wait_candidates_s}):
        variants.append((f"trigger_{t:g}", f"{base_label}, preempting only after {duration(t)} of waiting",
                         Variant(f"trigger {t:g}", replace(preempting, trigger_wait_s=t))))
    label, best = best_variant(workload, suggested)
    variants.append(("best", label, best))
    variants.append(("bound", BOUND_LABEL, bound_variant(workload)))
    return variants


def preemption_policy(workload: Workload) -> PolicyConfig:
    """The policy in force, turned on where the cluster does not preempt (its tiers' may_preempt kept): what the
    site would configure when it turns preemption on."""
    actual = workload.actual.policy
    return actual if actual.enabled else replace(actual, enabled=True)


def _forget(wh: Warehouse, cluster: str) -> None:
    with wh.transaction():
        for table in ("counterfactual_runs", "counterfactual_scenarios", "counterfactual_figures",
                      "counterfactual_hours"):
            wh.con.execute(f"DELETE FROM {table} WHERE cluster = $c", {"c": cluster})  # noqa: S608


def store(wh: Warehouse, computed: Computed, mark: str) -> None:
    """Replace the cluster's counterfactual in one transaction."""
    cluster = computed.window.cluster
    head = computed.headline
    errors = computed.validation.errors
    none = computed.scenarios[0]
    with wh.transaction():
        for table in ("counterfactual_runs", "counterfactual_scenarios", "counterfactual_figures"):
            wh.con.execute(f"DELETE FROM {table} WHERE cluster = $c", {"c": cluster})  # noqa: S608
        wh.con.execute(
            "INSERT INTO counterfactual_runs (cluster, window_start, window_end, jobs, fingerprint, "
            "preemptions_error, lost_gpu_h_error, high_wait_error, reproduces, high_wait_saved_gpu_h, "
            "thrown_away_gpu_h, lower_wait_added_gpu_h, net_value, net_low, net_high, breakeven_factor, breakeven, "
            "tier_weights, notes, computed_at, capacity_gpu_h, validation, interval_covers, sweeps, "
            "high_wait_saved_gpu_h_low, high_wait_saved_gpu_h_high, thrown_away_gpu_h_low, thrown_away_gpu_h_high, "
            "lower_wait_added_gpu_h_low, lower_wait_added_gpu_h_high) "
            "VALUES ($c, $t0, $t1, $jobs, $mark, $ep, "
            "$el, $ew, $ok, $saved, $thrown, $added, $net, $low, $high, $factor, $be, $weights, $notes, $at, "
            "$capacity, $checks, $covers, $sweeps, $s0, $s1, $th0, $th1, $a0, $a1)",
            {
                "c": cluster, "t0": computed.window.start, "t1": computed.window.end, "jobs": computed.jobs,
                "mark": mark, "ep": errors["preemptions"], "el": errors["lost_gpu_h"],
                "ew": errors["high_wait_median_s"], "ok": computed.validation.ok,
                "saved": head.saved_high_gpu_h, "thrown": head.thrown_away_gpu_h, "added": head.lower_added_gpu_h,
                "net": head.net_value, "low": head.net_low, "high": head.net_high,
                "factor": head.breakeven.factor, "be": head.breakeven.kind,
                "weights": json.dumps(computed.weights, sort_keys=True),
                "notes": "\n".join(computed.notes), "at": datetime.now(UTC), "capacity": head.capacity_gpu_h,
                "checks": json.dumps({"tolerance": computed.validation.tolerance,
                                      "checks": computed.validation.rows()}),
                "covers": computed.covers or None, "sweeps": json.dumps(computed.sweeps, sort_keys=True),
                "s0": head.terms[0][0], "s1": head.terms[0][1], "th0": head.terms[1][0], "th1": head.terms[1][1],
                "a0": head.terms[2][0], "a1": head.terms[2][1],
            },
        )
        for s in computed.scenarios:
            _store_scenario(wh, cluster, s, none, computed.weights, computed.samples, computed.confidence,
                            computed.window.seconds)
        _store_hours(wh, cluster, computed.window.start, none.hours)
    wh.mark_changed()


def _store_hours(wh: Warehouse, cluster: str, start: datetime, allocated: np.ndarray | None) -> None:
    wh.con.execute("DELETE FROM counterfactual_hours WHERE cluster = $c", {"c": cluster})
    if allocated is None or allocated.size == 0:
        return
    first = start.replace(minute=0, second=0, microsecond=0)
    frame = pl.DataFrame({
        "cluster": [cluster] * allocated.size,
        "hour": pl.datetime_range(first, first + timedelta(hours=allocated.size - 1), "1h", time_zone="UTC",
                                  eager=True),
        "allocated_gpu_s": allocated,
    })
    wh.con.register("_cf_hours", frame.to_arrow())
    try:
        wh.con.execute("INSERT INTO counterfactual_hours SELECT cluster, hour, allocated_gpu_s FROM _cf_hours")
    finally:
        wh.con.unregister("_cf_hours")


def _store_scenario(wh: Warehouse, cluster: str, s: Scenario, none: Scenario, weights: Mapping[str, float],
                    samples: int, confidence: float, window_s: float) -> None:
    per_job = net_per_job(none.table, s.table, weights)
    low, high = net_interval(none, s, weights, samples, confidence, window_s)
    wh.con.execute(
        "INSERT INTO counterfactual_scenarios VALUES ($c, $s, $label, $trigger, $policy, $n, $net, $low, $high)",
        {
            "c": cluster, "s": s.key, "label": s.label, "trigger": s.trigger_wait_s,
            "policy": json.dumps(s.policy, sort_keys=True), "n": int(s.table.preemptions.sum()),
            "net": float(per_job.sum()) / 3600.0, "low": None if low is None else low / 3600.0,
            "high": None if high is None else high / 3600.0,
        },
    )
    changes = {c.tier: c for c in tier_changes(none.table, s.table)}
    intervals = figure_intervals(none, s, samples, confidence, window_s)
    for f in s.figures:
        c = changes[f.tier]
        # each figure's interval beside it (figure_intervals; interval_columns names where)
        bounds = {f"b{2 * i + k}": value for i, interval in enumerate(intervals[f.tier].values())
                  for k, value in enumerate(interval)}
        columns = ", ".join(name for column in intervals[f.tier] for name in interval_columns(column))
        wh.con.execute(
            "INSERT INTO counterfactual_figures (cluster, scenario, tier, jobs, wait_p50_s, wait_p90_s, "  # noqa: S608
            "completion_p50_s, completed, preemptions, thrown_away_gpu_h, victim_waiting_gpu_h, waiting_gpu_h, "
            "busy_gpu_h, late_waiting_gpu_h, undrained_jobs, affected_jobs, extra_wait_mean_s, extra_wait_p50_s, "
            f"{columns}) "
            "VALUES ($c, $s, $tier, $jobs, $p50, $p90, $comp, $completed, $n, $thrown, $vw, $wait, $busy, $late, "
            f"$undrained, $affected, $mean, $median, {', '.join('$' + key for key in bounds)})",
            {
                "c": cluster, "s": s.key, "tier": f.tier, "jobs": f.jobs, "p50": f.wait_p50_s, "p90": f.wait_p90_s,
                "comp": f.completion_p50_s, "completed": f.completed, "n": f.preemptions,
                "thrown": f.thrown_away_gpu_h, "vw": f.victim_waiting_gpu_h, "wait": f.waiting_gpu_h,
                "busy": f.busy_gpu_h, "late": f.late_waiting_gpu_h, "undrained": f.undrained,
                "affected": c.affected, "mean": c.extra_wait_mean_s, "median": c.extra_wait_p50_s, **bounds,
            },
        )


def interval_columns(column: str) -> tuple[str, str]:
    """The columns of a stored figure's interval: `<figure>_low`/`_high`, a duration's before its `_s`."""
    stem, unit = (column[:-2], "_s") if column.endswith("_s") else (column, "")
    return f"{stem}_low{unit}", f"{stem}_high{unit}"


def store_best(wh: Warehouse, workload: Workload, params: AnalyticsSettings, suggested: Variant | None,
               processes: int | None = None, draws: int = 0) -> bool:
    """After `suggest`: replace the cluster's scenario (d) with suggest's best change, when the counterfactual
    covers the same window (else `analyze` has not run on this data yet, or suggest ran on another window):
    returns whether it did."""
    cluster = workload.window.cluster
    row = wh.con.execute("SELECT window_start, window_end FROM counterfactual_runs WHERE cluster = $c",
                         {"c": cluster}).fetchall()
    if not row or (row[0][0], row[0][1]) != (workload.window.start, workload.window.end):
        return False
    text, variant = best_variant(workload, suggested)
    (none, _), (best, _) = run_scenarios(workload, [
        ("none", "", Variant("none", replace(workload.actual.policy, enabled=False))),
        ("best", text, variant),
    ], processes, draws)
    with wh.transaction():
        for table in ("counterfactual_scenarios", "counterfactual_figures"):
            wh.con.execute(f"DELETE FROM {table} WHERE cluster = $c AND scenario = 'best'", {"c": cluster})  # noqa: S608
        _store_scenario(wh, cluster, best, none, dict(params.tier_weights), params.readiness_bootstrap_samples,
                        params.readiness_confidence, workload.window.seconds)
    wh.mark_changed()
    return True


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A cluster's stored counterfactual, as every reader words it (dashboards/answer.py)."""

    cluster: str
    run: Mapping[str, Any]
    scenarios: Sequence[Mapping[str, Any]]
    figures: Sequence[Mapping[str, Any]]

    def scenario(self, key: str) -> Mapping[str, Any] | None:
        return next((s for s in self.scenarios if s["scenario"] == key), None)

    def figure(self, scenario: str, tier: str) -> Mapping[str, Any] | None:
        return next((f for f in self.figures if f["scenario"] == scenario and f["tier"] == tier), None)

    def best_trigger(self) -> Mapping[str, Any] | None:
        triggers = [s for s in self.scenarios if s["scenario"].startswith("trigger_") and s["net_value"] is not None]
        return max(triggers, key=lambda s: s["net_value"], default=None)


READ_RUNS = "SELECT * FROM counterfactual_runs ORDER BY cluster"
READ_SCENARIOS = "SELECT * FROM counterfactual_scenarios ORDER BY cluster, trigger_wait_s NULLS FIRST, scenario"
READ_FIGURES = "SELECT * FROM counterfactual_figures ORDER BY cluster, scenario, tier"


def answers(runs: Sequence[Mapping[str, Any]], scenarios: Sequence[Mapping[str, Any]],
            figures: Sequence[Mapping[str, Any]]) -> dict[str, Answer]:
    """The stored rows grouped per cluster (readers query the three tables with READ_*)."""
    return {
        r["cluster"]: Answer(
            r["cluster"], r,
            [s for s in scenarios if s["cluster"] == r["cluster"]],
            [f for f in figures if f["cluster"] == r["cluster"]],
        )
        for r in runs
    }


def read(wh: Warehouse) -> dict[str, Answer]:
    return answers(wh.query(READ_RUNS).to_dicts(), wh.query(READ_SCENARIOS).to_dicts(),
                   wh.query(READ_FIGURES).to_dicts())

