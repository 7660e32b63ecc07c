"""Suggestions: which scheduler setting to change, to what, and what it would have saved.

Each generator reads its evidence from the ledger (views built by `preemptlens
analyze`), decides from that evidence whether the problem it addresses is
there at all, and if so measures the expected effect by replaying the recorded
workload (analytics/whatif/replay.py) under the changed policy, against the replay
under the actual policy (so that the replay's own error cancels out as far as
it can). The replay error is reported with every result. docs/tuning.md
describes each rule.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from statistics import median
from typing import Any

from preemptlens.analytics.actions import ACTIONS, DEFAULT_CYCLE_S, ActionSettings
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.simulator.engine import lost_progress_s, schedule_interval
from preemptlens.analytics.whatif import counterfactual, scorecard, snippets
from preemptlens.analytics.whatif.replay import (
    Figures,
    Validation,
    Variant,
    Workload,
    hashed_share,
    jittered_figures,
    load_workload,
    sweep,
    validate,
)
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.analytics.whatif.victim_order import ORDER_OF, Comparison
from preemptlens.errors import SchemaError
from preemptlens.reading.words import (
    DURATION,
    GPU_H,
    before_after,
    change,
    duration,
    gpu_hours,
    gpus,
    pct,
    significant,
)
from preemptlens.warehouse import Warehouse, query_sql

KINDS = (
    "not_yet",
    "min_run_time",
    "victim_order",
    "near_completion",
    "grace_time",
    "checkpoint_interval",
    *counterfactual.ACTION_OF.values(),
    "tier_limits",
    "idle_reclaim",
    "repeat_victims",
    "quotas",
    "published_rules",
)


@dataclass(frozen=True)
class Suggestion:
    kind: str
    subject: str  # what it applies to: '' for the cluster, else a team or pool
    title: str
    setting: str
    current: str | None
    proposed: str | None
    evidence: str
    effect: str
    lost_gpu_h_change: float | None = None
    high_wait_change_s: float | None = None
    victims_per_week_change: float | None = None
    # Lost GPU-hours saved over the window.
    saving_gpu_h: float = 0.0
    # Relative cut in lost GPU-hours plus relative cut in preemptions: what ranks the suggestions.
    score: float = 0.0
    snippets: Mapping[str, str] = field(default_factory=dict)
    # The replayed change (None when the effect was not replayed): the counterfactual's best alternative
    # builds on the first one.
    variant: Variant | None = field(default=None, compare=False)
    # Added for a failure of the verdict no rule addressed (readiness_fixes): ranks after the rules' own.
    generic: bool = field(default=False, compare=False)


@dataclass
class Context:
    wh: Warehouse
    workload: Workload
    settings: TuningSettings
    params: dict[str, Any]
    baseline: Figures
    validation: Validation
    processes: int | None
    # The actual policy replayed with jittered inputs, once, paired with every variant's jittered replays.
    _baseline_draws: list[Figures] | None = None

    def baseline_draws(self) -> list[Figures]:
        if self._baseline_draws is None:
            self._baseline_draws = jittered_figures(
                self.workload, Variant("actual", self.workload.actual.policy), self.settings.jitter_replays,
                self.processes)
        return self._baseline_draws

    # What failed in the verdict's evidence (scorecard.failing): each gets a fix in the list.
    failures: tuple[str, ...] = ()
    compare_victim_order: bool = True
    # The cost-aware victim order replayed beside today's (a bound: no scheduler offers it), once computed.
    victim_comparison: Comparison | None = None
    # Suggestions a rule found but withheld, each with why (suggest prints them after the suggestions).
    withheld: list[str] = field(default_factory=list)
    # preemptlens's actions as configured, and how often they act (serve.actions_interval_s): replayed so.
    actions: Mapping[str, ActionSettings] = field(default_factory=lambda: {n: c() for n, c in ACTIONS.items()})
    action_cycle_s: float = DEFAULT_CYCLE_S
    # The analytics settings in force: with them, the nets `analyze` stored for this window are read back, not
    # replayed again (counterfactual.stored_nets). None: every net is replayed.
    analytics: AnalyticsSettings | None = None
    _stored_nets: dict[str, counterfactual.Net] | None = None

    def nets(self, variants: Sequence[Variant]) -> list[counterfactual.Net]:
        """Each variant's replayed net against no preemption at the tier weights `analyze` stored, with its
        interval, as the verdict's headline weighs today's policy."""
        rows = self.wh.query("select tier, weight from analytics_tier_weights").to_dicts()
        weights = {r["tier"]: float(r["weight"]) for r in rows} or dict(AnalyticsSettings().tier_weights)
        samples = int(self.params["readiness_bootstrap_samples"])
        confidence = float(self.params["readiness_confidence"])
        if self._stored_nets is None:
            self._stored_nets = {} if self.analytics is None else counterfactual.stored_nets(
                self.wh, self.workload, self.analytics, self.settings, weights, samples, confidence)
        return counterfactual.nets(self.workload, variants, weights, samples, confidence, self.processes,
                                   self.settings.jitter_replays, self._stored_nets)

    def actions_in_force(self) -> tuple[str, ...]:
        """The actions preemptlens can take on this cluster's scheduler: the one of the scheduler modelled, or
        slurm_protect where the generic model replays a Slurm cluster."""
        model = self.workload.actual.policy.scheduler
        if model == "generic" and self.scheduler == snippets.SLURM:
            return ("slurm_protect",)
        return (counterfactual.ACTION_OF[model],)

    @property
    def cluster(self) -> str:
        return self.workload.window.cluster

    @property
    def scheduler(self) -> str | None:
        """The scheduler the cluster runs: the one that stated its policy, else what its jobs came from (None
        when not known: a simulated or imported cluster)."""
        stated = self.workload.actual.stated_by
        if stated in (snippets.SLURM, snippets.KUEUE, snippets.KAI, snippets.VOLCANO, snippets.KUBERNETES):
            return stated
        sources = {r["source"] for r in self.q("select distinct source from jobs where cluster = $c")}
        for name in (snippets.SLURM, snippets.KUBERNETES):
            if sources == {name}:
                return name
        return None

    def q(self, sql: str, **extra: Any) -> list[dict[str, Any]]:
        window = self.workload.window
        given = {"c": window.cluster, "t0": window.start, "t1": window.end, **extra}
        # DuckDB refuses parameters the statement does not use.
        return self.wh.query(sql, {k: v for k, v in given.items() if f"${k}" in sql}).to_dicts()

    def acceptable(self, fig: Figures) -> bool:
        """A change may cost the high tiers at most max_wait_increase_s of median wait."""
        return _wait_delta(self.baseline, fig) <= self.settings.max_wait_increase_s

    def gain(self, fig: Figures) -> float:
        return self.baseline.lost_gpu_h - fig.lost_gpu_h

    def score(self, fig: Figures) -> float:
        """Relative cut in lost GPU-hours plus relative cut in preemptions: both are what a change buys."""
        base = self.baseline
        lost = self.gain(fig) / base.lost_gpu_h if base.lost_gpu_h else 0.0
        preemptions = (base.preemptions - fig.preemptions) / base.preemptions if base.preemptions else 0.0
        return lost + preemptions

    def worth_it(self, fig: Figures) -> bool:
        """Acceptable wait, and either lost GPU-hours or preemptions cut by min_gain_share without the
        other rising by more than half that."""
        if not self.acceptable(fig):
            return False
        base = self.baseline
        share = self.settings.min_gain_share
        lost = self.gain(fig) / base.lost_gpu_h if base.lost_gpu_h else 0.0
        cut = (base.preemptions - fig.preemptions) / base.preemptions if base.preemptions else 0.0
        return (lost >= share and cut >= -share / 2) or (cut >= share and lost >= -share / 2)


def _wait_spread(waits: Sequence[float | None]) -> str:
    """The high tiers' median wait change over the replays; nothing where it is 0 on every one (a figure the
    same under every draw shows no change)."""
    known = [w for w in waits if w is not None]
    if not known or not any(known):
        return ""
    return f", high-priority median wait change {significant(min(known))} to {significant(max(known))} s"


def _wait_delta(base: Figures, fig: Figures) -> float:
    if base.high_wait_median_s is None or fig.high_wait_median_s is None:
        return 0.0
    return fig.high_wait_median_s - base.high_wait_median_s


def _effect(ctx: Context, fig: Figures, extra: str = "", variant: Variant | None = None,
            draws: Sequence[Figures] | None = None, of_what: str = "") -> dict[str, Any]:
    """The replayed effect, each change with enough digits to show its size, and its interval: the change over
    replays with jittered inputs (`variant` replayed paired with the baseline's draws), or over `draws` the
    caller made (`of_what` says of what) against the baseline."""
    # The replay's own error is stored and shown once (replay_validation), not repeated in every effect.
    base = ctx.baseline
    wait = _wait_delta(base, fig)
    before, after = base.victims_per_week, fig.victims_per_week
    if before is not None and after is not None:
        victims = f"victims per week {before_after(before, after)}"
        per_week: float | None = after - before
    else:
        victims = (f"victims in the window {base.victim_jobs} -> {fig.victim_jobs} "
                   f"({fig.victim_jobs - base.victim_jobs:+d}); per week unknown: {base.per_week_note}")
        per_week = None
    spread = ""
    if of_what and draws:
        cuts = [d.lost_gpu_h - base.lost_gpu_h for d in draws]
        waits = [_wait_delta(base, d) for d in draws]
        spread = (f" [over {of_what}: lost GPU-hours change {significant(min(cuts))} to {significant(max(cuts))}"
                  f"{_wait_spread(waits)}]")
        draws = None
    elif draws is None and variant is not None:
        draws = jittered_figures(ctx.workload, variant, ctx.settings.jitter_replays, ctx.processes)
    if draws:
        paired = list(zip(ctx.baseline_draws(), draws, strict=False)) if len(draws) > 1 else []
        if paired:
            cuts = [d.lost_gpu_h - b.lost_gpu_h for b, d in paired]
            waits = [_wait_delta(b, d) for b, d in paired]
            spread = (f" [over {len(paired)} replays with jittered inputs and event order: lost GPU-hours change "
                      f"{significant(min(cuts))} to {significant(max(cuts))}{_wait_spread(waits)}]")
        else:
            spread = " [one replay (tuning.jitter_replays = 1): no interval]"
    text = (
        f"replayed over the window: lost GPU-hours {before_after(base.lost_gpu_h, fig.lost_gpu_h)}, high-priority "
        f"wait median {before_after(base.high_wait_median_s, fig.high_wait_median_s, DURATION)}, p90 "
        f"{before_after(base.high_wait_p90_s, fig.high_wait_p90_s, DURATION)}, {victims}"
        f"{extra}{spread}"
    )
    return {
        "effect": text,
        "lost_gpu_h_change": fig.lost_gpu_h - base.lost_gpu_h,
        "high_wait_change_s": wait,
        "victims_per_week_change": per_week,
        "saving_gpu_h": ctx.gain(fig),
        "score": ctx.score(fig),
    }


def _wait_words(seconds: float) -> str:
    """A queue wait in words: under a minute, else minutes or hours (never '0.0 h')."""
    return "under a minute" if seconds < 60 else duration(seconds)


def _times(ratio: float, at_least: bool) -> str:
    """'12 times', or 'at least 100 times' when the wait compared with was floored at a minute."""
    return f"{'at least ' if at_least else ''}{ratio:,.0f} times" if ratio >= 10 else f"{ratio:.1f} times"


def _preemptible_qos(ctx: Context) -> tuple[str, ...]:
    rows = ctx.q(
        query_sql("tuning", "preemptible_classes")
    )
    return tuple(r["priority_class"] for r in rows)


def _best(ctx: Context, variants: Sequence[Variant]) -> tuple[Variant, Figures] | None:
    results = sweep(ctx.workload, variants, ctx.processes)
    good = [(v, f) for v, f in zip(variants, results, strict=True) if ctx.worth_it(f)]
    if not good:
        return None
    return max(good, key=lambda vf: round(ctx.score(vf[1]), 6))


# -- generators -----------------------------------------------------------------------------


def min_run_time(ctx: Context) -> list[Suggestion]:
    policy = ctx.workload.actual.policy
    # A restarted run pays its warm-up again: preempting it inside the warm-up throws all of it away.
    rows = ctx.q(
        query_sql("tuning", "early_victims"),
        early=float(ctx.params["early_victim_s"]),
        g=policy.grace_s,
    )[0]
    if rows["n"] < ctx.settings.min_preemptions:
        return []
    share = rows["early"] / rows["n"]
    if share < ctx.settings.early_victim_share_min:
        return []
    candidates = sorted({float(c) for c in ctx.settings.min_run_candidates_s if float(c) > policy.min_run_s})
    variants = [Variant(f"min_run {c:g}", replace(policy, min_run_s=c)) for c in candidates]
    found = _best(ctx, variants)
    if found is None:
        return []
    variant, fig = found
    value = variant.policy.min_run_s
    return [
        Suggestion(
            kind="min_run_time",
            subject="",
            title=f"Let jobs run {duration(value)} before they may be preempted",
            setting="minimum run time before preemption",
            current=duration(policy.min_run_s),
            proposed=duration(value),
            evidence=(
                f"{rows['early']} of {rows['n']} victims ({100 * share:.0f}%) were preempted before "
                f"{duration(float(ctx.params['early_victim_s']))} or within their warm-up, losing "
                f"{gpu_hours(rows['early_lost'])}; sweep of {', '.join(duration(c) for c in candidates)}"
            ),
            snippets=snippets.min_runtime(value, _preemptible_qos(ctx)),
            variant=variant,
            **_effect(ctx, fig, variant=variant),
        )
    ]


def near_completion(ctx: Context) -> list[Suggestion]:
    """Near-completion victims (the ledger's work_done_share at or above analytics.near_completion_share) are
    the evidence; the protection threshold is chosen by replaying it and the shares below it that
    tuning.near_completion_candidates lists, since protecting the last tenth alone may only move the
    preemption onto another victim."""
    share_done = float(ctx.params["near_completion_share"])
    rows = ctx.q(
        query_sql("tuning", "near_completion_victims")
    )[0]
    if rows["near"] < ctx.settings.min_preemptions or rows["lost"] <= 0:
        return []
    lost_share = rows["near_lost"] / rows["lost"]
    if lost_share < ctx.settings.near_completion_lost_share_min:
        return []
    policy = ctx.workload.actual.policy
    shares = sorted({share_done, *(float(c) for c in ctx.settings.near_completion_candidates if c < share_done)})
    action = ctx.actions_in_force()[0]
    settings = ctx.actions[action]
    # The share is the action's only mark here: its cost marks off, its caps, cycle and hold times as configured.
    variants = [Variant(f"preemptlens's {settings.title} from {100 * c:g}% done", replace(
        policy, protection=settings.replayed(
        ctx.action_cycle_s, cost_high_gpu_s=None, cost_low_gpu_s=None, near_completion_high=c,
        near_completion_low=c))) for c in shares]
    found = _best(ctx, variants)
    if found is None:
        return []
    variant, fig = found
    assert variant.policy.protection is not None
    chosen = float(variant.policy.protection.near_completion_high or share_done)
    (net, low, high), = ctx.nets([variant])
    protected = ctx.q(
        query_sql("tuning", "protected_victims"),
        s=chosen,
    )[0]
    return [
        Suggestion(
            kind="near_completion",
            subject="",
            title=f"Protect victims that have done {100 * chosen:.0f}% of their work (preemptlens {action})",
            setting=f"[{action}] near_completion_high",
            current=_action_state(settings),
            proposed=f"{chosen:g}, enforced, {_caps(settings, ctx.action_cycle_s)}",
            evidence=(
                f"{rows['near']} of {rows['n']} victims had done at least {100 * share_done:.0f}% of their work "
                f"and lost {rows['near_lost']:.1f} of {rows['lost']:.1f} lost GPU-hours ({100 * lost_share:.0f}%; "
                f"measured from checkpoints or progress for {rows['near_measured']} of them, the rest declared or "
                "assumed); "
                f"{protected['n']} victims past {100 * chosen:.0f}% (median "
                f"{duration(protected['left_s'] or 0)} left) lost {protected['lost']:.1f}; sweep of "
                f"{', '.join(f'{100 * c:.0f}%' for c in shares)}"
            ),
            snippets=snippets.near_completion(chosen, float(protected["left_s"] or 0.0), _preemptible_qos(ctx)),
            variant=variant,
            **_effect(ctx, fig, _net_words(net, low, high), variant=variant),
        )
    ]


def grace_time(ctx: Context) -> list[Suggestion]:
    policy = ctx.workload.actual.policy
    rows = ctx.q(
        query_sql("tuning", "checkpointing_victims")
    )[0]
    total = ctx.q(
        query_sql("tuning", "lost_total")
    )[0]["lost"]
    # A final checkpoint can at most save what checkpointing victims lost since their last one.
    if rows["n"] < ctx.settings.min_preemptions or rows["lost"] < ctx.settings.min_gain_share * total:
        return []
    workload = ctx.workload
    assumed = ""
    changes: dict[str, dict[str, Any]] = {}
    if not workload.saves:
        # Nobody could save in the grace time in force, so nobody was seen saving: assume a share can.
        share = ctx.settings.assumed_final_checkpoint_share
        cost = ctx.settings.checkpoint_cost_s
        changes = {
            j.job_id: {"final_checkpoint": True, "save_s": cost}
            for j in workload.jobs
            if j.checkpoint_interval_s and hashed_share(j.job_id, share)
        }
        assumed = (
            f"; assumes {100 * share:.0f}% of checkpointing jobs save a final checkpoint in {cost:.0f} s at the "
            "signal (none could be seen with the grace time in force)"
        )
    candidates = sorted({float(c) for c in ctx.settings.grace_candidates_s if float(c) > policy.grace_s})
    variants = [Variant(f"grace {c:g}", replace(policy, grace_s=c), changes) for c in candidates]
    found = _best(ctx, variants)
    if found is None:
        return []
    variant, fig = found
    value = variant.policy.grace_s
    partitions = tuple(
        r["pool"] for r in ctx.q(
            query_sql("tuning", "preempted_pools")
        )
    )
    measured = (
        f"{len(workload.saves)} jobs saved a final checkpoint at the signal, "
        f"median {median(workload.saves.values()):.0f} s"
        if workload.saves
        else "no final checkpoint seen"
    )
    return [
        Suggestion(
            kind="grace_time",
            subject="",
            title=f"Give victims {value:.0f} s between the preemption signal and the kill for a final checkpoint",
            setting="grace time",
            current=f"{policy.grace_s:.0f} s",
            proposed=f"{value:.0f} s",
            evidence=(
                f"{rows['n']} victims that checkpoint lost {gpu_hours(rows['lost'])} of work done since their "
                f"last checkpoint; {measured}"
            ),
            snippets=snippets.grace_time(value, partitions),
            variant=variant,
            **_effect(ctx, fig, assumed, variant=variant),
        )
    ]


@dataclass(frozen=True)
class IntervalCheck:
    """The advised interval replayed over the preemptions that happened: the team's victims whose loss is
    measured, each losing what it would have lost since its last checkpoint under the advised cadence, less
    the saves the advised cadence adds over the team's checkpointing run time in the window."""

    preemptions: int
    lost_gpu_h: float
    advised_lost_gpu_h: float
    extra_saves_gpu_h: float

    @property
    def saving_gpu_h(self) -> float:
        return self.lost_gpu_h - self.advised_lost_gpu_h - self.extra_saves_gpu_h

    def describe(self) -> str:
        return (
            f"checked against the {self.preemptions} preemptions of the team with a measured loss: lost "
            f"{self.lost_gpu_h:.1f} GPU-hours, {self.advised_lost_gpu_h:.1f} at the advised interval, plus "
            f"{self.extra_saves_gpu_h:+.1f} of saves: saving {self.saving_gpu_h:.1f}"
        )


Schedule = tuple[tuple[float, float], ...]  # (from age s, interval s): JobSpec.checkpoint_schedule


def last_checkpoint_under(work_start_s: float, interval: float | Schedule, t: float) -> float | None:
    """The last checkpoint at or before t of a run whose work began at work_start_s, checkpointing every
    `interval` seconds of it, or on a schedule by the run's age (wall time: idle stretches are not taken out)."""
    if not isinstance(interval, tuple):
        done = math.floor((t - work_start_s) / interval)
        return work_start_s + done * interval if done >= 1 else None
    last, at = None, work_start_s + schedule_interval(interval, 0.0)
    while at <= t:
        last = at
        at += schedule_interval(interval, at - work_start_s)
    return last


def saves_per_s(interval: float | Schedule, exposure: Sequence[tuple[float, float | None, float]]) -> float:
    """Saves per second of run time: 1 / interval, or for a schedule its rate in each age band weighted by the
    time runs spent there (`exposure`: (from s, to s or None, GPU-hours) per band of preemption_hazard)."""
    if not isinstance(interval, tuple):
        return 1.0 / interval
    total = sum(e for _, _, e in exposure)
    if total <= 0:
        return 1.0 / interval[0][1]
    return sum(e / schedule_interval(interval, lo) for lo, _, e in exposure) / total


def check_interval(ctx: Context, team: str, current: float, proposed: float | Schedule, cost: float,
                   run_gpu_s: float, exposure: Sequence[tuple[float, float | None, float]] = ()) -> IntervalCheck:
    """What the advised interval (or schedule) would have saved on the team's preemptions in the window,
    replayed one by one with the simulator's own rule of lost progress (engine.lost_progress_s)."""
    rows = ctx.q(query_sql("tuning", "interval_check"), team=team)
    lost = sum(r["gpus"] * r["lost_s"] for r in rows)
    advised = sum(
        r["gpus"] * lost_progress_s(
            r["time_s"], r["run_start_s"], last_checkpoint_under(r["work_start_s"], proposed, r["time_s"])
        )
        for r in rows
    )
    extra = cost * run_gpu_s * (saves_per_s(proposed, exposure) - 1 / current)
    return IntervalCheck(len(rows), lost / 3600.0, advised / 3600.0, extra / 3600.0)


# A band of the hazard with fewer preemptions than this is pooled with the next: its rate alone is noise.
_HAZARD_BAND_MIN = 3
# Adjacent steps of an advised schedule closer than this ratio are one step: a change nobody would configure.
_SCHEDULE_STEP_RATIO = 1.5


def hazard_schedule(bands: Sequence[Mapping[str, Any]], cost: float) -> tuple[Schedule, list[str]]:
    """Young's interval sqrt(2 x cost / hazard) per age band of the team's preemption hazard (preemption_hazard),
    bands pooled until each holds _HAZARD_BAND_MIN preemptions (the last one may hold fewer: its rate is read
    from what it has, or as the rule of three's bound when it has none), and neighbours whose intervals are
    within _SCHEDULE_STEP_RATIO pooled too; rounded to whole minutes. Returns the schedule and the pooled bands'
    words."""
    pooled: list[tuple[float, float, float]] = []  # (from s, preemptions, exposure h)
    events, exposure, start = 0.0, 0.0, None
    for b in bands:
        start = b["age_from_s"] if start is None else start
        events += b["preemptions"]
        exposure += b["exposure_h"]
        if events >= _HAZARD_BAND_MIN:
            pooled.append((float(start), events, exposure))
            events, exposure, start = 0.0, 0.0, None
    if start is not None and exposure > 0:
        if pooled and events == 0:
            # a tail without preemptions keeps the last rate rather than the rule of three's wide bound
            last = pooled.pop()
            pooled.append((last[0], last[1], last[2] + exposure))
        else:
            pooled.append((float(start), events, exposure))

    def every(d: float, e: float) -> float:
        rate_per_s = (d if d > 0 else 3.0) / (e * 3600.0)
        return max(60.0, round(math.sqrt(2 * cost / rate_per_s) / 60) * 60)

    # Neighbours whose intervals are within _SCHEDULE_STEP_RATIO are one band: their preemptions and run-hours
    # pooled and the interval drawn again from both, until every step differs from the next by more.
    merged = True
    while merged and len(pooled) > 1:
        merged = False
        for k in range(len(pooled) - 1):
            (lo, d1, e1), (_, d2, e2) = pooled[k], pooled[k + 1]
            one, two = every(d1, e1), every(d2, e2)
            if max(one, two) / min(one, two) < _SCHEDULE_STEP_RATIO:
                pooled[k:k + 2] = [(lo, d1 + d2, e1 + e2)]
                merged = True
                break
    words = [f"from {duration(lo)}: {d:g} in {e:.0f} run-hours" for lo, d, e in pooled]
    steps = [(0.0 if k == 0 else lo, every(d, e)) for k, (lo, d, e) in enumerate(pooled)]
    return tuple(steps), words


def schedule_text(schedule: Schedule) -> str:
    """'30 min'; '5 min to 60 min, then 22 min to 4.0 h, then 110 min after'; a first step longer than itself
    reads 'none in the first 15 min, then ...' (the run's first save comes one interval into the next step)."""
    if len(schedule) == 1:
        return duration(schedule[0][1])
    parts = [f"{duration(every)} to {duration(schedule[k + 1][0])}" for k, (_, every) in enumerate(schedule[:-1])]
    if schedule[0][1] >= schedule[1][0]:
        parts[0] = f"none in the first {duration(schedule[1][0])}"
    return ", then ".join([*parts, f"{duration(schedule[-1][1])} after"])


def checkpoint_interval(ctx: Context) -> list[Suggestion]:
    """Young's interval per team, from the preemption hazard as it falls with run age: sqrt(2 x checkpoint cost /
    hazard) in each age band of the team's runs (preemption_hazard), a schedule where the hazard changes with
    age. The cost is the median time the team's saves took where a source times them (checkpoints.save_s), else
    its final checkpoints at the signal, else tuning.checkpoint_cost_s (stated); the current interval its jobs'
    measured cadence, else the declared one. The advice is replayed over the whole window and checked against
    the preemptions that happened (check_interval); both must show a saving."""
    rows = ctx.q(
        query_sql("tuning", "checkpoint_exposure")
    )
    timed = {r["team"]: r for r in ctx.q(query_sql("tuning", "checkpoint_costs"))}
    cadence = {r["team"]: r for r in ctx.q(query_sql("tuning", "team_cadence"))}
    hazard: dict[str, list[dict[str, Any]]] = {}
    for b in ctx.q(query_sql("tuning", "team_hazard")):
        hazard.setdefault(b["team"], []).append(b)
    found = []
    ratio_min = ctx.settings.checkpoint_ratio_min
    workload = ctx.workload
    by_team: dict[str, list[float]] = {}
    saves: dict[str, list[float]] = {}
    for j in workload.jobs:
        team = j.team or "(none)"
        if j.checkpoint_interval_s:
            by_team.setdefault(team, []).append(j.checkpoint_interval_s)
        if j.job_id in workload.saves:
            saves.setdefault(team, []).append(workload.saves[j.job_id])
    policy = workload.actual.policy
    for r in rows:
        team = r["team"]
        if r["n"] < ctx.settings.min_preemptions or team not in by_team or team not in hazard:
            continue
        mtbp = r["run_s"] / r["n"]
        if team in timed and timed[team]["save_s"] is not None:
            cost = float(timed[team]["save_s"])
            basis = f"measured: median of {timed[team]['saves']} timed saves"
        elif team in saves:
            cost = median(saves[team])
            basis = "measured from final checkpoints"
        else:
            cost = ctx.settings.checkpoint_cost_s
            basis = "assumed (tuning.checkpoint_cost_s)"
        if cost <= 0:
            continue  # saves that cost nothing trade nothing off: no interval to advise
        schedule, bands = hazard_schedule(hazard[team], cost)
        current = median(by_team[team])
        if all(1 / ratio_min < every / current < ratio_min for _, every in schedule):
            continue
        exposure = [(b["age_from_s"], b["age_to_s"], b["exposure_gpu_h"]) for b in hazard[team]]
        members = [j for j in workload.jobs if (j.team or "(none)") == team and j.checkpoint_interval_s]
        first = schedule[0][1]
        change: dict[str, Any] = {"checkpoint_interval_s": first, "checkpoint_schedule": schedule if len(schedule) > 1
                                  else ()}
        changes = {j.job_id: change for j in members}
        interval_variant = Variant(f"interval {team}", policy, changes)
        fig = sweep(workload, [interval_variant], 1)[0]
        # The engine writes checkpoints for free; charge their cost here.
        gpu_s = sum(j.gpus * j.work_s for j in members if j.work_s < workload.horizon_s)
        advised = schedule if len(schedule) > 1 else first
        overhead_h = cost * gpu_s * (saves_per_s(advised, exposure) - 1 / current) / 3600.0
        adjusted = replace(fig, lost_gpu_h=fig.lost_gpu_h + overhead_h)
        if not ctx.acceptable(adjusted) or ctx.gain(adjusted) <= 0:
            continue
        check = check_interval(ctx, team, current, advised, cost, r["gpu_s"], exposure)
        if check.preemptions and check.saving_gpu_h <= 0:
            continue
        known = cadence.get(team, {"measured": 0, "declared": 0})
        mean_rate = math.sqrt(2 * cost * mtbp)
        proposed = schedule_text(schedule)
        found.append(
            Suggestion(
                kind="checkpoint_interval",
                subject=team,
                title=(f"Team {team}: checkpoint by run age ({proposed}) instead of every {duration(current)}"
                       if len(schedule) > 1 else
                       f"Team {team}: checkpoint every {proposed} instead of every {duration(current)}"),
                setting="checkpoint interval",
                current=duration(current),
                proposed=proposed,
                evidence=(
                    f"{r['n']} preemptions in {r['run_s'] / 3600:.0f} run-hours; by run age "
                    f"({'; '.join(bands)}); checkpoint cost {cost:.0f} s ({basis}); current interval the median "
                    f"of {known['measured']} jobs' measured cadence and {known['declared']} declared; Young's "
                    f"sqrt(2 x {cost:.0f} s / hazard) per age band (a mean rate, one every {duration(mtbp)}, "
                    f"would give {mean_rate:.0f} s at every age); "
                    + (check.describe() if check.preemptions else "no preemption of the team with a measured loss "
                       "to check it against")
                ),
                snippets=snippets.checkpoint_interval(team, schedule),
                variant=interval_variant,
                **_effect(ctx, adjusted, f" (checkpoint overhead {significant(overhead_h)} GPU-hours included)",
                          draws=[replace(d, lost_gpu_h=d.lost_gpu_h + overhead_h) for d in jittered_figures(
                              workload, interval_variant, ctx.settings.jitter_replays, ctx.processes)]),
            )
        )
    return found


# Draws of which high jobs a quota turns away (see tier_limits).
_QUOTA_DRAWS = 4


def _mean_figures(figs: Sequence[Figures]) -> Figures:
    waits = [f.high_wait_median_s for f in figs if f.high_wait_median_s is not None]
    return Figures(
        preemptions=round(sum(f.preemptions for f in figs) / len(figs)),
        lost_gpu_h=sum(f.lost_gpu_h for f in figs) / len(figs),
        high_wait_median_s=sum(waits) / len(waits) if waits else None,
        victim_jobs=round(sum(f.victim_jobs for f in figs) / len(figs)),
        weeks=figs[0].weeks,
    )


def tier_limits(ctx: Context) -> list[Suggestion]:
    trends = ctx.q(
        query_sql("tuning", "tier_share_trends")
    )
    found = []
    workload = ctx.workload
    # A cap holds a team at the share before its growth, for the teams that grow fastest: it rests on the trend
    # Q2 reads, so while Q2 calls that trend unknown (too few weeks), a slope over a shorter span is no ground for
    # one; the cap is withheld and says why.
    q2 = ctx.q(query_sql("tuning", "trend_known"))
    q2_unknown = None if q2 and q2[0]["value"] is not None else (
        q2[0]["missing"] if q2 and q2[0]["missing"] else "Q2 has not been answered: run `preemptlens analyze`")
    for tr in trends:
        if tr["slope"] is None or not (tr["slope"] > tr["slope_max"] or tr["last"] > tr["share_max"]):
            continue
        short = tr["weeks"] < tr["min_weeks"]
        if q2_unknown is not None or short:
            why = q2_unknown if q2_unknown is not None else (
                f"pool {tr['pool']} has {tr['weeks']} weeks of submissions, fewer than the {tr['min_weeks']} a trend "
                "needs")
            ctx.withheld.append(
                f"a cap on the high-priority GPUs of the teams that grow fastest in pool {tr['pool']} (critical+high "
                f"share of GPU-hours {100 * (tr['first'] or 0):.0f}% -> {100 * tr['last']:.0f}%, "
                f"{100 * tr['slope']:+.1f} points a week over {tr['weeks']} weeks): withheld, Q2 calls the trend "
                f"unknown ({why})")
            continue
        teams = ctx.q(
            query_sql("tuning", "team_high_shares"),
            p=tr["pool"],
        )
        for team in teams:
            usage = ctx.q(
                query_sql("tuning", "pool_mean_gpus"),
                span=workload.horizon_s,
                p=tr["pool"], t=team["team"],
            )[0]
            mean_gpus = float(usage["mean_gpus"] or 0.0)
            # Hold the team's high-tier use at the pool's share before the growth: demote the excess.
            keep = min(1.0, max(0.0, float(tr["first"] or 0.0)) / max(float(tr["last"]), 1e-9))
            cap = max(1, math.ceil(mean_gpus * keep))
            team_high = [
                j.job_id for j in workload.jobs
                if j.team == team["team"] and j.pool == tr["pool"] and j.tier == "high"
            ]
            # Which of the team's jobs a quota would have turned away is not in the data: replay several
            # equally likely draws of the excess and take their mean effect, so that one draw's chaotic
            # knock-on effects do not decide the suggestion.
            draws = [
                {j: {"tier": "normal"} for j in team_high if not hashed_share(f"{d}:{j}" if d else j, keep)}
                for d in range(_QUOTA_DRAWS)
            ]
            draws = [d for d in draws if d]
            if not draws:
                continue
            limited = [Variant(f"limit {team['team']} draw {i}", workload.actual.policy, d)
                       for i, d in enumerate(draws)]
            drawn = sweep(workload, limited, ctx.processes)
            fig = _mean_figures(drawn)
            demoted = round(sum(len(d) for d in draws) / len(draws))
            if not ctx.worth_it(fig):
                continue
            found.append(
                Suggestion(
                    kind="tier_limits",
                    subject=f"{tr['pool']}/{team['team']}",
                    title=f"Cap team {team['team']}'s high-priority GPUs in pool {tr['pool']} at {cap}",
                    setting="high-tier quota",
                    current=f"about {gpus(round(mean_gpus))} on average",
                    proposed=gpus(cap),
                    evidence=(
                        f"pool {tr['pool']}: critical+high share of GPU-hours {100 * (tr['first'] or 0):.0f}% -> "
                        f"{100 * tr['last']:.0f}%, {100 * tr['slope']:+.1f} points a week; team {team['team']} "
                        f"drives {100 * team['high_share_slope']:+.1f} points a week"
                    ),
                    snippets=snippets.tier_limits(team["team"], "high", cap, keep),
                    variant=limited[0],
                    **_effect(ctx, fig, f" (about {demoted} of the team's {len(team_high)} high jobs replayed as "
                                        f"normal; mean of {len(draws)} draws)",
                              draws=drawn, of_what=f"the {len(draws)} draws of which high jobs the cap turns away"),
                )
            )
    return found


def idle_reclaim(ctx: Context) -> list[Suggestion]:
    warn, release = ctx.settings.reclaim_warn_s, ctx.settings.reclaim_release_s
    row = ctx.q(
        query_sql("tuning", "idle_avoidable")
    )[0]
    idle = ctx.q(
        query_sql("tuning", "idle_reclaimable"),
        r=release,
    )[0]
    if row["avoidable"] == 0 or row["avoidable_lost"] < ctx.settings.min_gain_share * row["lost"]:
        return []
    return [
        Suggestion(
            kind="idle_reclaim",
            subject="",
            title=f"Reclaim idle-hoarded GPUs: warn after {duration(warn)} at zero, release after {duration(release)}",
            setting="idle GPU reclaim",
            current="none",
            proposed=f"warn {duration(warn)}, release {duration(release)}",
            evidence=(
                f"{row['avoidable']} of {row['n']} preemptions happened while enough GPUs in the pool had been "
                f"idle for the hoarding window; {idle['stretches']} idle stretches"
            ),
            effect=(
                f"from the ledger (not replayed): {row['avoidable']} preemptions and {row['avoidable_lost']:.1f} "
                f"lost GPU-hours avoided; {gpu_hours(idle['reclaimable'])} held idle beyond "
                f"{duration(release)} freed"
            ),
            lost_gpu_h_change=-float(row["avoidable_lost"]),
            victims_per_week_change=-row["avoidable"] / ctx.baseline.weeks if ctx.baseline.weeks else None,
            saving_gpu_h=float(row["avoidable_lost"]),
            score=float(row["avoidable_lost"]) / max(float(row["lost"]), 1e-9) + row["avoidable"] / row["n"],
            snippets=snippets.idle_reclaim(warn, release),
        )
    ]


def repeat_victims(ctx: Context) -> list[Suggestion]:
    rows = ctx.q(
        query_sql("tuning", "repeat_victims")
    )
    repeat = [r for r in rows if r["n"] >= 2]
    if len(repeat) < ctx.settings.min_preemptions:
        return []
    tiers = {r["tier"] for r in repeat}
    others = [r["wait_s"] for r in rows if r["n"] == 0 and r["tier"] in tiers]
    if not others:
        return []
    repeat_wait = median(r["wait_s"] for r in repeat)
    other_wait = max(median(others), 60.0)
    ratio = repeat_wait / other_wait
    if ratio < ctx.settings.repeat_wait_ratio_min:
        return []
    return [
        Suggestion(
            kind="repeat_victims",
            subject="",
            title="Compensate repeat victims: requeue them ahead, and use fair sharing with a half-life",
            setting="requeue priority / fair share",
            current="none",
            proposed="priority boost for requeued victims; time-based fair share",
            evidence=(
                f"{len(repeat)} jobs were preempted twice or more and queued a median {duration(repeat_wait)} "
                f"over their runs, {_times(ratio, median(others) < other_wait)} the median wait of unpreempted "
                f"jobs of the same tiers ({_wait_words(median(others))})"
            ),
            effect=(
                "not replayed (the scheduler model has no priority boost): spreads preemptions over more jobs "
                f"instead of the same {len(repeat)}"
            ),
            saving_gpu_h=0.0,
            snippets=snippets.repeat_victims(100, 7 * 86400.0),
        )
    ]


def not_yet(ctx: Context) -> list[Suggestion]:
    """The verdict's advice (readiness_verdict, analytics/whatif/scorecard.py): do not rely on preemption while the
    evidence says it should not be the main tool; the fixes of what failed follow it in the ranking."""
    rows = ctx.q(
        query_sql("tuning", "readiness_gaps")
    )
    if not rows or rows[0]["verdict"] != scorecard.NOT_MAIN:
        return []
    r = rows[0]
    reasons = [x for x in scorecard.reasons_of(r) if not x.startswith("could not answer")]
    verdict = f"borderline: {r['verdict']}" if r["borderline"] else r["verdict"]
    return [
        Suggestion(
            kind="not_yet",
            subject="",
            title="Do not rely on preemption as a main tool yet",
            setting="preemption as a main tool",
            current=None,
            proposed=None,
            evidence="; ".join(reasons),
            effect=f"{verdict}; fix first what failed: the fixes for it in this list",
            snippets=snippets.not_yet("the fixes for what failed, in this list"),
        )
    ]


def slurm_victim_order(ctx: Context) -> list[Suggestion]:
    """Slurm evicts by job order (the oldest jobs first: those that have done the most work) unless
    PreemptParameters=youngest_first: replayed both ways where Slurm is the scheduler modelled."""
    policy = ctx.workload.actual.policy
    if policy.scheduler != "slurm" or policy.youngest_first or not ctx.baseline.preemptions:
        return []
    variant = Variant("youngest_first", replace(policy, youngest_first=True))
    found = _best(ctx, [variant])
    if found is None:
        return []
    _, fig = found
    ages = ctx.q("select median(run_age_s) as age, count(*) as n from preemption_ledger "
                 "where cluster = $c and time >= $t0 and time < $t1")[0]
    return [
        Suggestion(
            kind="victim_order",
            subject="",
            title="Preempt the youngest jobs first (Slurm PreemptParameters=youngest_first)",
            setting="Slurm victim order",
            current="job order (oldest jobs first)",
            proposed="youngest first",
            evidence=(
                f"{ages['n']} victims had run a median {significant(float(ages['age'] or 0.0))} s; Slurm takes "
                "candidates in job order, so the jobs that have run longest go first"
            ),
            snippets=snippets.slurm_victim_order(ctx.workload.actual.version),
            variant=variant,
            **_effect(ctx, fig, variant=variant),
        )
    ]


def _action_state(s: ActionSettings) -> str:
    return f"enabled, {s.mode}" if s.enabled else "not enabled"


def _caps(s: ActionSettings, cycle_s: float) -> str:
    """The caps and the cycle an action acts within, in words."""
    boost = f", boost in steps of {s.boost_step} up to {s.max_boost}" if s.max_boost > s.boost_step else ""
    return (f"at most {s.max_jobs} jobs and {pct(s.max_pool_share)} of a pool's GPUs held, every "
            f"{duration(cycle_s)}, each hold at least {duration(s.min_hold_s)} and at most "
            f"{duration(s.max_hold_s)}{boost}")


def _net_words(net: float, low: float | None, high: float | None) -> str:
    interval = "" if low is None or high is None else f" [{change(low, GPU_H)}, {change(high, GPU_H)}]"
    return f"; replayed net against plain queueing {change(net, GPU_H)}{interval} tier-weighted"


# What each action holds, in words (analytics/actions.py).
_HOLDS = {
    "kai_protect": "makes the PodGroups of costly running jobs non-preemptible",
    "slurm_protect": "moves costly victims waiting to restart to a QOS nothing preempts, for their next run",
    "kueue_boost": "boosts the priority of costly Workloads, so that Kueue takes them after the others of their "
                   "class (and not at all where the boost reaches the preemptor's priority)",
}


def protect_costly(ctx: Context) -> list[Suggestion]:
    """preemptlens's action for the cluster's scheduler (analytics/actions.py), replayed as it acts: its cost mark
    as configured and below it (half the high mark to release), its caps, cycle and hold times as configured, the
    scheduler's own victim order around what it holds. Choosing every victim by least live cost, which no
    scheduler offers, is shown beside it only as a bound."""
    if not ctx.baseline.preemptions:
        return []
    policy = ctx.workload.actual.policy
    found: list[Suggestion] = []
    for action in ctx.actions_in_force():
        s = ctx.actions[action]
        # KAI's action holds by progress by default: its cost marks are tried from the Slurm action's default
        top = s.cost_high_gpu_s if s.cost_high_gpu_s is not None else ACTIONS["slurm_protect"]().cost_high_gpu_s
        assert top is not None
        marks = sorted({top, top / 2, top / 4}, reverse=True)
        variants = [Variant(f"preemptlens's {s.title} from a live cost of {gpu_hours(h / 3600)}", replace(
            policy, protection=s.replayed(
            ctx.action_cycle_s, cost_high_gpu_s=h, cost_low_gpu_s=h / 2))) for h in marks]
        best = _best(ctx, variants)
        if best is None:
            continue
        variant, fig = best
        chosen = variant.policy.protection
        assert chosen is not None and chosen.cost_high_gpu_s is not None
        (net, low, high), (today, _, _), (bound, _, _) = ctx.nets(
            [variant, Variant("today", policy), counterfactual.bound_variant(ctx.workload)])
        high_mark = gpu_hours(chosen.cost_high_gpu_s / 3600)
        found.append(Suggestion(
            kind=action,
            subject="",
            title=f"Hold costly victims back: preemptlens's {s.title} from a live cost of {high_mark}",
            setting=f"[{action}] cost_high_gpu_s, cost_low_gpu_s",
            current=_action_state(s),
            proposed=(f"enabled, enforced, cost_high_gpu_s = {chosen.cost_high_gpu_s:g}, cost_low_gpu_s = "
                      f"{chosen.cost_low_gpu_s:g}; {_caps(s, ctx.action_cycle_s)}"),
            evidence=(f"replayed as the action acts: every {duration(ctx.action_cycle_s)} it {_HOLDS[action]}, "
                      f"from the live cost then, costliest first within its caps; the scheduler takes its victims "
                      f"in its own order ({victim_order_words(policy.scheduler)}) around the held ones; marks "
                      f"tried: {', '.join(gpu_hours(h / 3600) for h in marks)}; today's policy nets "
                      f"{change(today, GPU_H)}; {counterfactual.BOUND_LABEL}: net {change(bound, GPU_H)}"),
            snippets=snippets.protect(action, chosen.cost_high_gpu_s, float(chosen.cost_low_gpu_s or 0.0)),
            variant=variant,
            **_effect(ctx, fig, _net_words(net, low, high), variant=variant),
        ))
    return found


def victim_order_words(scheduler: str) -> str:
    return ORDER_OF.get(scheduler, ORDER_OF["generic"])


def readiness_fixes(ctx: Context, found: Sequence[Suggestion]) -> list[Suggestion]:
    """For each failure of the verdict's evidence that no other suggestion addresses, its own first fix
    (scorecard.FIXES), not replayed: so that what `suggest` ranks and what the verdict says to fix first are
    one list."""
    added: list[Suggestion] = []
    have = {s.kind for s in found}
    for item in ctx.failures:
        if set(scorecard.FIXES[item]) & have:
            continue
        kind = scorecard.FIXES[item][0]
        made = _GENERIC[kind](ctx, item)
        added.append(made)
        have.add(kind)
    return added


def _failure_words(item: str) -> str:
    if item.startswith("Q"):
        return f"{item} answered no ({scorecard.QUESTIONS[int(item[1:])]})"
    return {"net": "preemption cost more than it saved against plain queueing",
            "avoidable": "too many preemptions could have used idle-hoarded GPUs",
            "hoarding": "more allocated GPU-hours are held idle than analytics.reclaim_idle_share"}[item]


def _generic(kind: str, title: str, setting: str, proposed: str, make: Callable[[], dict[str, str]]
             ) -> Callable[[Context, str], Suggestion]:
    def build(ctx: Context, item: str) -> Suggestion:
        return Suggestion(
            kind=kind, subject="", title=title, setting=setting, current=None, proposed=proposed,
            evidence=f"the verdict's evidence: {_failure_words(item)}",
            effect="not replayed: the article's remedy for this failure; no setting change was measured",
            snippets=make(),
            generic=True,
        )

    return build


_GENERIC: Mapping[str, Callable[[Context, str], Suggestion]] = {
    "idle_reclaim": _generic("idle_reclaim", "Reclaim idle-hoarded GPUs before preempting for them",
                             "idle GPU reclaim", "warn and release idle GPUs",
                             lambda: snippets.idle_reclaim(1800.0, 3600.0)),
    "quotas": _generic("quotas", "Set GPU quotas per team and tiered pools before relying on preemption",
                       "quotas and tiered pools", "a quota per team, a reserved pool for time-sensitive work",
                       snippets.quotas),
    "tier_limits": _generic("tier_limits", "Limit how much work may be critical or high",
                            "high-tier quota", "a GPU cap on the critical and high tiers per team",
                            snippets.tier_cap),
    "checkpoint_interval": _generic("checkpoint_interval", "Make preemptible jobs checkpoint (and say how often)",
                                    "checkpoints", "every preemptible job checkpoints",
                                    lambda: snippets.checkpoint_interval("<team>", ((0.0, 1800.0),))),
    "near_completion": _generic("near_completion", "Hold victims near completion back with preemptlens's action",
                                "[kai_protect], [slurm_protect] or [kueue_boost] near_completion_high",
                                "hold a job once it has done 90% of its work",
                                lambda: snippets.near_completion(0.9, 0.0, ())),
    "published_rules": _generic("published_rules", "Publish the preemption rules and notify every victim",
                                "published rules and notices", "who may preempt whom, and a notice per victim",
                                snippets.published_rules),
}


GENERATORS: tuple[Callable[[Context], list[Suggestion]], ...] = (
    not_yet,
    min_run_time,
    slurm_victim_order,
    near_completion,
    grace_time,
    checkpoint_interval,
    protect_costly,
    tier_limits,
    idle_reclaim,
    repeat_victims,
)


def rank(found: Sequence[Suggestion]) -> list[Suggestion]:
    """The verdict's advice first (it overrides tuning), then by relative improvement (a change that was not
    replayed scores nothing). The verdict's fix_first is this order's fixes of what failed."""
    return sorted(found, key=lambda s: (s.kind != "not_yet", -s.score, s.generic, KINDS.index(s.kind), s.subject))


def suggest(ctx: Context, only: Sequence[str] | None = None) -> list[Suggestion]:
    found: list[Suggestion] = []
    for generator in GENERATORS:
        if only is None or generator.__name__ in only:
            found.extend(generator(ctx))
    if only is None:
        found += readiness_fixes(ctx, found)
    scheduler = ctx.scheduler
    return rank([replace(s, snippets=snippets.for_scheduler(s.snippets, scheduler)) for s in found])


def context(wh: Warehouse, window: Window, settings: TuningSettings, compare_victim_order: bool = True,
            actions: Mapping[str, ActionSettings] | None = None, action_cycle_s: float = DEFAULT_CYCLE_S,
            analytics: AnalyticsSettings | None = None) -> Context:
    """Load the workload, replay it under the actual policy and validate it against the ledger; `actions`: the
    configured actions (their defaults when not given), replayed every `action_cycle_s`; `analytics`: the
    settings `analyze` ran with, so that the nets it stored are read back (Context.analytics)."""
    params = wh.query("select * from analytics_params").to_dicts()
    if not params:
        raise SchemaError(f"warehouse {wh.path} has no analytics settings", "run `preemptlens analyze` first")
    workload = load_workload(wh, window, settings)
    validation, baseline = validate(wh, workload, settings.validation_tolerance)
    processes = settings.processes or None
    return Context(wh, workload, settings, params[0], baseline, validation, processes,
                   failures=scorecard.failures_of(wh, window.cluster), compare_victim_order=compare_victim_order,
                   actions=actions if actions is not None else {n: c() for n, c in ACTIONS.items()},
                   action_cycle_s=action_cycle_s, analytics=analytics)


def first_change(found: Sequence[Suggestion]) -> Suggestion | None:
    """The highest-ranked suggestion whose effect was replayed: the counterfactual's best alternative
    builds on it."""
    return next((s for s in found if s.variant is not None), None)


def store(wh: Warehouse, ctx: Context, found: Sequence[Suggestion]) -> None:
    """Replace the window's suggestions and replay validation in one transaction (re-runs change nothing else)."""
    window = ctx.workload.window
    key = {"c": window.cluster, "t0": window.start, "t1": window.end}
    v = ctx.validation
    errors = v.errors
    created = datetime.now(UTC)
    with wh.transaction():
        wh.con.execute("DELETE FROM suggestions WHERE cluster = $c AND window_start = $t0 AND window_end = $t1", key)
        wh.con.execute("DELETE FROM replay_validation WHERE cluster = $c AND window_start = $t0 AND window_end = $t1",
                       key)
        draws = ctx.baseline_draws()
        intervals = {
            name: [min(values), max(values)]
            for name in ("preemptions", "victim_jobs", "lost_gpu_h", "high_wait_median_s", "thrown_away_gpu_h")
            for values in ([getattr(d, name) for d in draws if getattr(d, name) is not None],) if values
        }
        wh.con.execute(
            "INSERT INTO replay_validation (cluster, window_start, window_end, jobs, policy, observed_preemptions, "
            "replayed_preemptions, observed_lost_gpu_h, replayed_lost_gpu_h, observed_high_wait_s, "
            "replayed_high_wait_s, preemptions_error, lost_gpu_h_error, high_wait_error, reproduces, notes, "
            "created_at, observed_victims, replayed_victims, victims_error, replayed_intervals) VALUES ($c, $t0, $t1, "
            "$jobs, $policy, $op, $rp, $ol, $rl, $ow, $rw, $ep, $el, $ew, $ok, $notes, $at, $ov, $rv, $ev, $iv)",
            {
                **key,
                "jobs": len(ctx.workload.jobs),
                "policy": json.dumps(_policy_json(ctx)),
                "op": v.observed.preemptions, "rp": v.replayed.preemptions,
                "ol": v.observed.lost_gpu_h, "rl": v.replayed.lost_gpu_h,
                "ow": v.observed.high_wait_median_s, "rw": v.replayed.high_wait_median_s,
                "ep": errors["preemptions"], "el": errors["lost_gpu_h"], "ew": errors["high_wait_median_s"],
                "ok": v.ok,
                "notes": "\n".join(ctx.workload.notes),
                "at": created,
                "ov": v.observed.victim_jobs, "rv": v.replayed.victim_jobs, "ev": errors["victims"],
                "iv": json.dumps(intervals) if len(draws) > 1 else None,
            },
        )
        for position, s in enumerate(found, start=1):
            wh.con.execute(
                "INSERT INTO suggestions VALUES ($c, $t0, $t1, $rank, $kind, $subject, $title, $setting, $current, "
                "$proposed, $evidence, $effect, $lost, $wait, $victims, $saving, $snippets, $ok, $at)",
                {
                    **key,
                    "rank": position,
                    "kind": s.kind,
                    "subject": s.subject,
                    "title": s.title,
                    "setting": s.setting,
                    "current": s.current,
                    "proposed": s.proposed,
                    "evidence": s.evidence,
                    "effect": s.effect,
                    "lost": s.lost_gpu_h_change,
                    "wait": s.high_wait_change_s,
                    "victims": s.victims_per_week_change,
                    "saving": s.saving_gpu_h,
                    "snippets": json.dumps(dict(s.snippets), sort_keys=True),
                    "ok": v.ok,
                    "at": created,
                },
            )
    wh.mark_changed()

def _policy_json(ctx: Context) -> dict[str, Any]:
    policy = ctx.workload.actual.policy
    return {
        "scheduler": policy.scheduler,
        "min_run_s": policy.min_run_s,
        "grace_s": policy.grace_s,
        "requeue_hold_s": policy.requeue_hold_s,
        "latency_s": policy.latency_s,
        "queue_order": policy.queue_order,
        "may_preempt": {k: list(v) for k, v in policy.may_preempt.items()},
        "min_run_by_tier": dict(policy.min_run_by_tier),
        "grace_by_tier": dict(policy.grace_by_tier),
        "basis": dict(ctx.workload.actual.basis),
        "stated_by": ctx.workload.actual.stated_by,
    }
