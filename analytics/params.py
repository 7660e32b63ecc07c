"""The [analytics] settings and their copy in the warehouse.

Views are plain SQL, so the settings they depend on are written into the
one-row table `analytics_params` (and `analytics_tier_weights`) by
`preemptlens analyze` before the views are refreshed. Its columns come from
the settings themselves (`param_columns`): a new number or yes/no setting is
a column on the next analyze, with no migration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from preemptlens.config import section, section_of, setting
from preemptlens.contract import TIERS
from preemptlens.errors import ConfigError

IDLE_RULES = ("threshold", "zero")


def _share(value: float) -> str | None:
    return None if 0 <= value <= 1 else "a share between 0 and 1"


@section("analytics", "How `preemptlens analyze` computes the figures (docs/figures.md).")
@dataclass(frozen=True)
class AnalyticsSettings:
    idle_rule: str = setting(
        "threshold",
        "When a GPU sample counts as idle: `threshold` (busy below idle_busy_below) or `zero` "
        "(busy exactly 0, the Princeton jobstats rule).",
        choices=IDLE_RULES,
    )
    idle_busy_below: float = setting(0.05, "Busy ratio below which a sample is idle (threshold rule).", bounds=(0, 1))
    hoarding_window_s: float = setting(
        1800.0,
        "Seconds an allocated GPU must stay idle, without a gap in its samples, to count as hoarded.",
        bounds=(60, 7 * 86_400),
    )
    sample_step_s: float = setting(
        0.0,
        "Sampling step of gpu_samples in seconds; 0 infers it from the data (median spacing).",
        bounds=(0, 86_400),
    )
    link_tolerance_s: float = setting(
        120.0,
        "How far apart (seconds) a preempted run's end and a preemption_links row may be and still match; "
        "also how long before a preemption the preemptor's start may lie.",
        bounds=(0, 86_400),
    )
    near_completion_share: float = setting(
        0.9,
        "A victim whose work done reached this share of its work is a near-completion victim.",
    )
    early_victim_s: float = setting(
        600.0,
        "A victim preempted fewer than this many seconds into its run is an early victim.",
        bounds=(0, 7 * 86_400),
    )
    long_runner_factor: float = setting(
        4.0,
        "A preemptor whose run lasted more than this many times its tier's median run is a long runner "
        "(unlike critical work).",
        bounds=(1, 1000),
    )
    trend_weeks: int = setting(8, "Weeks over which scope-creep trends (slopes) are fitted.", bounds=(2, 520))
    tier_weights: dict[str, float] = setting(
        {"critical": 4.0, "high": 2.0, "normal": 1.0, "low": 0.5},
        "Value of one GPU-second of each tier's work in the net-benefit figures.",
        bounds=(0, 1000),
    )
    scarce_allocation_share: float = setting(
        0.85,
        "Scorecard Q1: an hour is busy when GPUs allocated and not idle-hoarded reach this share of capacity.",
    )
    scarce_queue_share: float = setting(
        0.25,
        "Scorecard Q1: an hour is under queue pressure when the GPU-hours waiting in the queue reach this "
        "share of the GPU-hours of capacity.",
    )
    scarce_hours_share: float = setting(
        0.5,
        "Scorecard Q1: GPUs are scarce for long stretches when at least this share of the hours is busy "
        "(and, separately, under queue pressure).",
    )
    scarce_queue_wait_s: float = setting(
        3600.0,
        "Scorecard Q1: time in the queue (seconds) a job's GPUs spend on average, first wait and waits to restart "
        "together, at or above which GPUs count as scarce.",
    )
    high_tier_share_max: float = setting(
        0.25,
        "Scorecard Q2: largest share of GPU-hours the critical and high tiers may hold to be narrow.",
    )
    high_tier_slope_max: float = setting(
        0.02,
        "Scorecard Q2: largest weekly change (absolute slope) of that share to be stable.",
        bounds=(0, 1),
    )
    checkpoint_coverage_min: float = setting(
        0.8,
        "Scorecard Q3: smallest share of victims with checkpoint data or a declared interval.",
        bounds=(0, 1),
    )
    loss_to_gain_max: float = setting(
        0.5,
        "Scorecard Q3: largest ratio of lost (plus warm-up) GPU-seconds to gained GPU-seconds.",
        bounds=(0, 1000),
    )
    trend_min_weeks: int = setting(
        4,
        "Scorecard Q2: fewest weeks of submissions a trend of the critical-plus-high share is fitted on (else "
        "unknown).",
        check=lambda v: None if v >= 2 else "at least 2",
    )
    visibility_min: float = setting(
        0.9,
        "Scorecard Q4: smallest share of preemptions that record both a reason and a preemptor.",
        bounds=(0, 1),
    )
    reclaim_idle_share: float = setting(
        0.1,
        "Scorecard verdict: share of allocated GPU-hours held idle above which reclaiming idle GPUs "
        "comes first.",
    )
    avoidable_share_max: float = setting(
        0.25,
        "Verdict: share of preemptions the ledger finds avoidable (enough idle-hoarded GPUs in the pool) above "
        "which preemption stands in for reclaiming idle GPUs and is not the main tool.",
        check=_share,
    )
    readiness_bootstrap_samples: int = setting(
        200,
        "Scorecard: bootstrap replicates (days resampled) behind each measure's interval.",
        bounds=(50, 10_000),
    )
    readiness_confidence: float = setting(
        0.9,
        "Scorecard: confidence of each measure's interval; a measure whose interval holds its threshold is "
        "borderline.",
        check=lambda v: None if 0.5 <= v < 1 else "at least 0.5 and below 1",
    )
    trigger_wait_candidates_s: list[float] = setting(
        [300.0, 900.0, 1800.0, 3600.0],
        "Counterfactual headline: trigger thresholds (seconds a preemptor must have waited before it may "
        "preempt) replayed beside today's policy.",
        check=lambda v: None if v and all(isinstance(x, int | float) and 0 < x <= 30 * 86400 for x in v)
        else "a non-empty list of seconds above 0 and at most 30 days",
    )
    requeue_window_s: float = setting(
        7 * 86400.0,
        "Window (seconds, back from each cluster's data end) of the preemptions, restarted or still waiting, "
        "whose waits for a restart give the expected requeue wait (expected_requeue: notices, My preemptions, "
        "live cost).",
        bounds=(3600, 366 * 86_400),
    )
    loss_coverage_min: float = setting(
        0.5,
        "Scorecard Q3: smallest share of the preemptions with a known gain whose lost progress is measured "
        "(basis checkpoint or rollback) for the loss to gain to be read from them; below it it is unknown.",
        check=lambda share: None if 0 <= share <= 1 else "expected a share between 0 and 1",
    )
    requeue_min_victims: int = setting(
        10,
        "Fewest victims of the window a group (tier, pool and GPU size class; then tier and size class in any "
        "pool; then the next size class down in any pool; then tier and pool, any size) must hold for the "
        "expected requeue wait to be read from it; with "
        "fewer, the next wider group answers (in the end the tier's, whatever its size), and the estimate says "
        "which.",
        bounds=(1, 10_000),
    )
    hang_min_s: float = setting(
        1800.0,
        "A run that ended other than completed or preempted is a hang when its job stopped reporting progress at "
        "least this many seconds (and hang_gap_factor times its usual gap between reports) before the end "
        "(run_ends, docs/figures.md).",
        bounds=(60, 7 * 86_400),
    )
    hang_gap_factor: float = setting(
        5.0,
        "How many of a run's usual gaps between progress reports (the median) its silence before the end must "
        "last, beside hang_min_s, for the run to be a hang.",
        bounds=(1, 1000),
    )

    def __post_init__(self) -> None:
        problems = []
        weights = dict(self.tier_weights)
        for tier, weight in weights.items():
            if tier not in TIERS:
                problems.append(f"analytics.tier_weights.{tier}: not a tier ({', '.join(TIERS)})")
            elif not isinstance(weight, int | float) or isinstance(weight, bool) or weight < 0:
                problems.append(f"analytics.tier_weights.{tier}: expected a number >= 0, got {weight!r}")
        missing = [t for t in TIERS if t not in weights]
        if missing:
            problems.append(f"analytics.tier_weights: no weight for {', '.join(missing)}")
        if self.hoarding_window_s <= 0:
            problems.append("analytics.hoarding_window_s: must be > 0")
        if self.sample_step_s < 0:
            problems.append("analytics.sample_step_s: must be >= 0 (0 infers it)")
        if self.trend_weeks < 2:
            problems.append("analytics.trend_weeks: a trend needs at least 2 weeks")
        if problems:
            raise ConfigError("; ".join(problems), "see docs/configuration.md, section [analytics]")
        # A weight may be written as a whole number in the file; the figures take it as a number.
        object.__setattr__(self, "tier_weights", {t: float(w) for t, w in weights.items()})

    @property
    def zero_rule(self) -> bool:
        return self.idle_rule == "zero"


SETTINGS = AnalyticsSettings

# The sampling step of a cluster whose GPUs have no two samples to space.
DEFAULT_STEP_S = 60.0

# The SQL type of each kind of setting that analytics_params holds; lists and maps
# (tier_weights has its own table) stay out.
_SQL_TYPES: dict[type, str] = {float: "DOUBLE", int: "INTEGER", bool: "BOOLEAN"}


def param_columns() -> list[tuple[str, str]]:
    """analytics_params's columns and SQL types, in the settings' order: every number or yes/no setting
    of [analytics] under its own name, and idle_rule as the yes/no `idle_zero_rule` the SQL tests (beside
    the threshold, where migration 0003 put it)."""
    columns = [("idle_busy_below", "DOUBLE"), ("idle_zero_rule", "BOOLEAN")]
    columns += [
        (s.key, _SQL_TYPES[s.kind])
        for s in section_of(SETTINGS).settings
        if s.kind in _SQL_TYPES and s.key != "idle_busy_below"
    ]
    return columns


def param_row(params: AnalyticsSettings, steps: Mapping[str, float]) -> dict[str, Any]:
    """The one row of analytics_params: the settings in force, with the sampling step resolved from each
    cluster's (`steps`, as analytics_sample_steps holds them): the one step every cluster has, None where they
    differ, the configured step or DEFAULT_STEP_S where there is no sample."""
    values = set(steps.values())
    shared = values.pop() if len(values) == 1 else None if values else (params.sample_step_s or DEFAULT_STEP_S)
    derived = {"idle_zero_rule": params.zero_rule, "sample_step_s": shared}
    return {c: derived[c] if c in derived else getattr(params, c) for c, _ in param_columns()}
