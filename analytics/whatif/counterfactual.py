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

Each gives, per tier, the first-start wait (median, p90), the completion time, work thrown away, victims'
waiting, all queue time and busy GPU-hours (docs/figures.md, section 10). The headline compares (b) with (a):
preemption saved the critical and high tiers X GPU-hours of queue time, and cost Y GPU-hours of work thrown
away and Z GPU-hours of lower-tier queue time. In a work-conserving queue preemption mostly moves waiting from
one tier to another and adds thrown-away work, so whether that pays is set by `analytics.tier_weights`: the
net value weighs each job's change in queue time and thrown-away work by its tier, and the break-even factor
is the multiple of the critical and high weights at which the net is zero.

Both sides come from replays of the same jobs, so the replay's own error (shown beside them) affects both
alike. The net's interval is a bootstrap over the jobs' submission days (Poisson weights, paired across
scenarios).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import multiprocessing
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
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
    observed_figures,
    outcome_figures,
    picklable,
    replay_outcome,
)
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.contract import TIERS
from preemptlens.errors import PreemptlensError
from preemptlens.reading.words import duration
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
    waiting_gpu_h: float
    busy_gpu_h: float


@dataclass(frozen=True)
class JobTable:
    """Per job of a replay, in the workload's job order: what the figures and the net are summed from."""

    tier: np.ndarray  # index into TIERS
    gpus: np.ndarray
    day: np.ndarray  # submission day, from the window's start
    first_wait_s: np.ndarray
    completion_s: np.ndarray  # NaN: not completed in the window
    waiting_s: np.ndarray  # all queue time: first wait and every wait to restart, to the window's end
    thrown_gpu_s: np.ndarray  # lost progress + warm-up paid in the window
    victim_waiting_gpu_s: np.ndarray  # GPUs x (restart or window end - preemption), over its preemptions
    busy_gpu_s: np.ndarray  # GPUs x run time in the window, less idle stretches
    preemptions: np.ndarray
    submit_s: np.ndarray | None = None  # seconds from the window's start (resampling_blocks)


def job_table(out: Outcome, start_day_s: float = 0.0) -> JobTable:
    """Per-job figures of a replay (or a simulation: the same engine). `start_day_s` is the window's start
    in seconds after midnight UTC, so that `day` counts UTC days."""
    horizon = out.horizon_s
    n = len(out.jobs)
    tier_index = {t: i for i, t in enumerate(TIERS)}
    tier = np.array([tier_index[j.tier] for j in out.jobs], dtype=np.int64)
    gpus = np.array([j.gpus for j in out.jobs], dtype=float)
    submit = np.array([j.submit_s for j in out.jobs], dtype=float)
    first_wait = np.full(n, np.nan)
    completion = np.full(n, np.nan)
    waiting = np.zeros(n)
    busy = np.zeros(n)
    for j, run_ids in enumerate(out.job_runs):
        if not run_ids:
            continue
        for k, r in enumerate(run_ids):
            run = out.runs[r]
            began = horizon if run.start_s is None else min(run.start_s, horizon)
            waited = max(0.0, began - min(run.submit_s, horizon))
            waiting[j] += waited
            if k == 0:
                first_wait[j] = waited
            if run.start_s is None or run.start_s >= horizon:
                continue
            stop = horizon if run.end_s is None else min(run.end_s, horizon)
            idle = sum(max(0.0, min(b, stop) - a) for a, b in run.idle if a < stop)
            busy[j] += gpus[j] * max(0.0, stop - run.start_s - idle)
        last = out.runs[run_ids[-1]]
        if last.state == "completed" and last.end_s is not None and last.end_s <= horizon:
            completion[j] = last.end_s - submit[j]
    thrown = np.zeros(n)
    victim_waiting = np.zeros(n)
    preemptions = np.zeros(n, dtype=np.int64)
    for p in out.preemptions():
        if p.time_s >= horizon:
            continue
        preemptions[p.victim] += 1
        thrown[p.victim] += p.lost_gpu_s
        if p.restart_s is not None and p.restart_s < horizon:
            # the warm-up is paid when the victim restarts, and only its part inside the window
            thrown[p.victim] += p.gpus * min(p.warmup_s, horizon - p.restart_s)
        back = horizon if p.restart_s is None else min(p.restart_s, horizon)
        victim_waiting[p.victim] += p.gpus * (back - p.time_s)
    day = np.floor((submit + start_day_s) / _DAY_S).astype(np.int64)
    return JobTable(tier, gpus, day, first_wait, completion, waiting, thrown, victim_waiting, busy, preemptions,
                    submit)


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


def tier_figures(table: JobTable) -> tuple[TierFigures, ...]:
    """The figures per tier, and over all tiers ('all'), of one replay's jobs."""
    found = []
    for name, mask in [*((t, table.tier == i) for i, t in enumerate(TIERS)), ("all", np.ones_like(table.gpus, bool))]:
        started = mask & ~np.isnan(table.first_wait_s)
        found.append(TierFigures(
            tier=name,
            jobs=int(started.sum()),
            wait_p50_s=_quantile(table.first_wait_s[started], 0.5),
            wait_p90_s=_quantile(table.first_wait_s[started], 0.9),
            completion_p50_s=_quantile(table.completion_s[mask], 0.5),
            completed=int((mask & ~np.isnan(table.completion_s)).sum()),
            preemptions=int(table.preemptions[mask].sum()),
            thrown_away_gpu_h=float(table.thrown_gpu_s[mask].sum()) / 3600.0,
            victim_waiting_gpu_h=float(table.victim_waiting_gpu_s[mask].sum()) / 3600.0,
            waiting_gpu_h=float((table.gpus * table.waiting_s)[mask].sum()) / 3600.0,
            busy_gpu_h=float(table.busy_gpu_s[mask].sum()) / 3600.0,
        ))
    return tuple(found)


def net_per_job(base: JobTable, other: JobTable, weights: Mapping[str, float]) -> np.ndarray:
    """Each job's tier-weighted GPU-seconds of time-to-result gained by `other` against `base` (no
    preemption): queue time saved, less work thrown away (the victim redoes it, so it reaches its result
    later by as much)."""
    w = np.array([weights[t] for t in TIERS])[base.tier]
    return w * (base.gpus * (base.waiting_s - other.waiting_s) - (other.thrown_gpu_s - base.thrown_gpu_s))


# From this many days on, the bootstrap resamples whole submission days (a day's jobs share its load); a shorter
# window is cut into _SHORT_BLOCKS equal stretches instead: over one day, resampling days makes every replicate a
# whole multiple of the net, an interval of [0, 3 x net] whatever the data.
_MIN_DAYS = 7
_SHORT_BLOCKS = 24


def resampling_blocks(table: JobTable, window_s: float) -> np.ndarray:
    """The block of each job the bootstrap resamples: its submission day, or its stretch of a short window."""
    if table.submit_s is None or window_s >= _MIN_DAYS * _DAY_S:
        return table.day
    width = max(window_s / _SHORT_BLOCKS, 1.0)
    return np.floor(np.clip(table.submit_s, 0.0, None) / width).astype(np.int64)


def bootstrap_interval(per_job: np.ndarray, days: np.ndarray, samples: int, confidence: float
                       ) -> tuple[float | None, float | None]:
    """Percentile interval of the sum over jobs, resampling blocks (submission days, or a short window's
    stretches: resampling_blocks) with Poisson(1) weights."""
    if per_job.size == 0:
        return None, None
    uniq, index = np.unique(days, return_inverse=True)
    by_day = np.bincount(index, weights=per_job, minlength=uniq.size)
    rng = np.random.default_rng(_SEED)
    weights = rng.poisson(1.0, size=(samples, uniq.size))
    reps = weights @ by_day
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(reps, [alpha, 1.0 - alpha])
    return float(low), float(high)


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
        out = replay_outcome(workload, variant)
        table = job_table(out, start % _DAY_S)
        figures = outcome_figures(out, workload.warmup_measured)
        hours = hourly_allocated(out, start % 3600.0) if key == "none" else None
        del out  # dropped inside the pause: the collector never scans it
    trigger = variant.policy.trigger_wait_s if key.startswith("trigger") else None
    return Scenario(key, label, _policy_json(variant), trigger, table, tier_figures(table), hours), figures


# The workload the worker processes replay: set before they fork, so it is inherited instead of pickled.
_SHARED: list[Workload] = []


def _run_shared(item: tuple[str, str, Variant]) -> tuple[Scenario, Figures]:
    return run_scenario(_SHARED[0], *item)


def run_scenarios(workload: Workload, items: Sequence[tuple[str, str, Variant]], processes: int | None
                  ) -> list[tuple[Scenario, Figures]]:
    """Every scenario, in parallel across the cores when there are several (as replay.sweep does)."""
    workers = min(len(items), processes or os.cpu_count() or 1)
    if workers <= 1:
        return [run_scenario(workload, *item) for item in items]
    sendable = [(k, t, picklable(v)) for k, t, v in items]
    _SHARED[:] = [workload]
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_run_shared, sendable))
    finally:
        _SHARED.clear()


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
    return (f"today's policy with preemptlens's {protection.action} at its default settings (run preemptlens "
            "suggest for the best change)", Variant("best", replace(policy, protection=protection)))


def bound_variant(workload: Workload) -> Variant:
    """(e): today's policy with victims chosen by least live cost: a bound, not a fix."""
    return Variant("bound", replace(preemption_policy(workload), victim_order="cost"))


def nets(workload: Workload, variants: Sequence[Variant], weights: Mapping[str, float], samples: int,
         confidence: float, processes: int | None = None) -> list[tuple[float, float | None, float | None]]:
    """Each variant's tier-weighted net against no preemption, GPU-hours, with its interval (as the headline's)."""
    items = [("none", "", Variant("none", replace(workload.actual.policy, enabled=False)))]
    items += [(f"v{k}", v.label, v) for k, v in enumerate(variants)]
    results = run_scenarios(workload, items, processes)
    none = results[0][0]
    found = []
    for scenario, _ in results[1:]:
        per_job = net_per_job(none.table, scenario.table, weights)
        low, high = bootstrap_interval(per_job, resampling_blocks(none.table, workload.window.seconds), samples,
                                       confidence)
        found.append((float(per_job.sum()) / 3600.0, None if low is None else low / 3600.0,
                      None if high is None else high / 3600.0))
    return found


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


def headline(none: Scenario, today: Scenario, weights: Mapping[str, float], samples: int, confidence: float,
             window_s: float) -> Headline:
    by = {f.tier: f for f in today.figures}
    base = {f.tier: f for f in none.figures}
    saved = sum(base[t].waiting_gpu_h - by[t].waiting_gpu_h for t in HIGH)
    added = sum(by[t].waiting_gpu_h - base[t].waiting_gpu_h for t in LOWER)
    per_job = net_per_job(none.table, today.table, weights)
    low, high = bootstrap_interval(per_job, resampling_blocks(none.table, window_s), samples, confidence)
    return Headline(
        saved_high_gpu_h=saved,
        thrown_away_gpu_h=by["all"].thrown_away_gpu_h - base["all"].thrown_away_gpu_h,
        lower_added_gpu_h=added,
        net_value=float(per_job.sum()) / 3600.0,
        net_low=None if low is None else low / 3600.0,
        net_high=None if high is None else high / 3600.0,
        breakeven=breakeven(none.table, today.table, weights),
    )


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


def refresh(wh: Warehouse, params: AnalyticsSettings, tuning: TuningSettings) -> dict[str, str]:
    """Replay each cluster whose inputs changed since the last refresh and store the counterfactual; returns
    per cluster what was done (replayed in N s, unchanged, or why there is no counterfactual)."""
    done: dict[str, str] = {}
    present = {r[0] for r in wh.con.execute("SELECT cluster FROM counterfactual_runs").fetchall()}
    for cluster in _clusters(wh):
        settings = {"weights": params.tier_weights, "triggers": params.trigger_wait_candidates_s,
                    "samples": params.readiness_bootstrap_samples, "confidence": params.readiness_confidence,
                    "tuning": asdict(tuning)}
        mark = fingerprint(wh, cluster, settings)
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
                               processes=tuning.processes or None)
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


def compute(wh: Warehouse, workload: Workload, params: AnalyticsSettings, tolerance: float,
            suggested: Variant | None = None, processes: int | None = None) -> Computed:
    """Replay the workload under (a)-(d) and measure the replay under today's policy against the ledger."""
    actual = workload.actual.policy
    preempting = preemption_policy(workload)
    variants: list[tuple[str, str, Variant]] = [
        ("none", "no preemption (plain queueing)", Variant("none", replace(actual, enabled=False))),
        ("today", "today's policy", Variant("today", actual)),
    ]
    notes = list(workload.notes)
    base_label = "today's policy" if actual.enabled else "preemption turned on"
    if not actual.enabled:
        # A cluster that does not preempt asks whether to turn it on: the headline weighs the preemption its
        # tiers would get (may_preempt as the queue orders them, or [tuning] may_preempt) against today's.
        variants.append(("on", "preemption turned on (" + ", ".join(
            f"{t} evicts {'/'.join(v)}" for t, v in preempting.may_preempt.items() if v) + ")",
            Variant("on", preempting)))
        notes.append("this cluster does not preempt today: the headline is preemption turned on against today's "
                     "plain queueing")
    for t in sorted({float(x) for x in params.trigger_wait_candidates_s}):
        variants.append((f"trigger_{t:g}", f"{base_label}, preempting only after {duration(t)} of waiting",
                         Variant(f"trigger {t:g}", replace(preempting, trigger_wait_s=t))))
    label, best = best_variant(workload, suggested)
    variants.append(("best", label, best))
    variants.append(("bound", BOUND_LABEL, bound_variant(workload)))
    results = run_scenarios(workload, variants, processes)
    scenarios = [scenario for scenario, _ in results]
    validation = Validation(observed_figures(wh, workload.window), results[1][1], tolerance)
    weights = dict(params.tier_weights)
    head = headline(scenarios[0], scenarios[1] if actual.enabled else scenarios[2], weights,
                    params.readiness_bootstrap_samples, params.readiness_confidence, workload.window.seconds)
    return Computed(workload.window, len(workload.jobs), validation, tuple(scenarios), head, weights,
                    tuple(notes), params.readiness_bootstrap_samples, params.readiness_confidence)


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
            "INSERT INTO counterfactual_runs VALUES ($c, $t0, $t1, $jobs, $mark, $ep, $el, $ew, $ok, $saved, "
            "$thrown, $added, $net, $low, $high, $factor, $be, $weights, $notes, $at)",
            {
                "c": cluster, "t0": computed.window.start, "t1": computed.window.end, "jobs": computed.jobs,
                "mark": mark, "ep": errors["preemptions"], "el": errors["lost_gpu_h"],
                "ew": errors["high_wait_median_s"], "ok": computed.validation.ok,
                "saved": head.saved_high_gpu_h, "thrown": head.thrown_away_gpu_h, "added": head.lower_added_gpu_h,
                "net": head.net_value, "low": head.net_low, "high": head.net_high,
                "factor": head.breakeven.factor, "be": head.breakeven.kind,
                "weights": json.dumps(computed.weights, sort_keys=True),
                "notes": "\n".join(computed.notes), "at": datetime.now(UTC),
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
    low, high = bootstrap_interval(per_job, resampling_blocks(none.table, window_s), samples, confidence)
    wh.con.execute(
        "INSERT INTO counterfactual_scenarios VALUES ($c, $s, $label, $trigger, $policy, $n, $net, $low, $high)",
        {
            "c": cluster, "s": s.key, "label": s.label, "trigger": s.trigger_wait_s,
            "policy": json.dumps(s.policy, sort_keys=True), "n": int(s.table.preemptions.sum()),
            "net": float(per_job.sum()) / 3600.0, "low": None if low is None else low / 3600.0,
            "high": None if high is None else high / 3600.0,
        },
    )
    for f in s.figures:
        wh.con.execute(
            "INSERT INTO counterfactual_figures VALUES ($c, $s, $tier, $jobs, $p50, $p90, $comp, $completed, $n, "
            "$thrown, $vw, $wait, $busy)",
            {
                "c": cluster, "s": s.key, "tier": f.tier, "jobs": f.jobs, "p50": f.wait_p50_s, "p90": f.wait_p90_s,
                "comp": f.completion_p50_s, "completed": f.completed, "n": f.preemptions,
                "thrown": f.thrown_away_gpu_h, "vw": f.victim_waiting_gpu_h, "wait": f.waiting_gpu_h,
                "busy": f.busy_gpu_h,
            },
        )


def store_best(wh: Warehouse, workload: Workload, params: AnalyticsSettings, suggested: Variant | None,
               processes: int | None = None) -> bool:
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
    ], processes)
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

