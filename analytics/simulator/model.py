"""The simulator's vocabulary: cluster shape, preemption policy, workload knobs, job specs.

Times inside the simulator are seconds from the simulation start (`SimConfig.start`),
kept integral by the workload generator so every time written to the warehouse is
exact to the microsecond and the analytics can recompute the ground truth exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType

from preemptlens.contract import TIER_RANK, TIERS
from preemptlens.errors import ConfigError

# PriorityClass-like names the simulator writes as `priority_class`, with their values.
PRIORITY_CLASSES: Mapping[str, tuple[str, float]] = MappingProxyType(
    {
        "critical": ("prod-critical", 1_000_000.0),
        "high": ("high-priority", 10_000.0),
        "normal": ("standard", 1_000.0),
        "low": ("best-effort", 100.0),
    }
)


# How a preemptor's victims are chosen (PolicyConfig.victim_order).
VICTIM_ORDERS = ("priority", "cost")
# Whose victim choice the engine follows (PolicyConfig.scheduler); see engine.py for each model and its source.
SCHEDULER_MODELS = ("generic", "slurm", "kueue", "kai")
# Order of the pending queue within a tier (PolicyConfig.queue_order): by the time a run became eligible (a
# requeued victim queues behind newer jobs), or by its job's first submission (a requeued victim keeps its place,
# as Slurm's job priority, Kueue's Workload creation time and KAI's PodGroup creation time do).
QUEUE_ORDERS = ("eligible", "submit")
# What the pending jobs below a blocked one may do (PolicyConfig.backfill): "reserve" holds the start of the
# highest-ranked job that can neither start nor preempt, and lets a lower job start only where it does not delay
# that start (Slurm's sched/backfill, EASY backfill); "greedy" lets every lower job take any GPUs that fit it
# (the engine before reservations; Kueue's BestEffortFIFO), so a big job can wait for ever behind small ones.
BACKFILLS = ("reserve", "greedy")


def _frozen(mapping: Mapping[str, tuple[str, ...]]) -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType(dict(mapping))


def _frozen_values(mapping: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class PoolSpec:
    name: str
    nodes: int
    gpus_per_node: int = 8

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


# preemptlens's own actions (analytics/actions.py) the engine can replay (PolicyConfig.protection).
PROTECTIONS = ("kueue_boost", "kai_protect", "slurm_protect")


@dataclass(frozen=True)
class Protection:
    """One of preemptlens's actions (analytics/actions.py, the same names and meanings) as the engine replays it.

    Every `cycle_s` (serve.actions_interval_s) it reads the live cost of the runs then (engine
    `victim_cost_gpu_s`) and their near-completion share; it holds a job whose cost or share reaches the high
    mark, costliest first, within `max_jobs` and `max_pool_share` of the pool's GPUs; it releases a job that
    ended, reached `max_hold_s` (not held again for as long), checkpointed since its hold began (with
    `release_after_checkpoint`), or fell below both low marks after `min_hold_s`. What a hold does is the
    scheduler's: `kai_protect` makes the PodGroup non-preemptible; `slurm_protect` holds only victims waiting to
    restart (judged by the cost they had when preempted) and their next run is non-preemptible (a QOS nothing
    preempts) until it ends; `kueue_boost` adds `level` to the Workload's priority, in `boost_step` steps up to
    `max_boost`, one step per min_hold_s: Kueue takes as candidates only workloads of lower priority than the
    preemptor's and orders them by that priority, so a boost keeps a run only from preemptors its boosted
    priority reaches, and otherwise puts it after the unboosted runs of its class.
    """

    action: str
    cost_high_gpu_s: float | None = 28_800.0
    cost_low_gpu_s: float | None = 14_400.0
    near_completion_high: float | None = None
    near_completion_low: float | None = None
    max_jobs: int = 20
    max_pool_share: float = 0.25
    min_hold_s: float = 1800.0
    max_hold_s: float = 86_400.0
    release_after_checkpoint: bool = False
    cycle_s: float = 300.0
    boost_step: int = 1
    max_boost: int = 1

    def __post_init__(self) -> None:
        if self.action not in PROTECTIONS:
            raise ConfigError(f"protection: action must be one of {', '.join(PROTECTIONS)}, not {self.action!r}")
        if self.cycle_s <= 0 or self.max_hold_s <= 0 or not 0 < self.max_pool_share <= 1:
            raise ConfigError("protection: cycle_s and max_hold_s must be > 0, max_pool_share in (0, 1]")

    @property
    def while_waiting(self) -> bool:
        return self.action == "slurm_protect"


@dataclass(frozen=True)
class PolicyConfig:
    """How the scheduler preempts.

    `may_preempt` maps a preemptor's tier to the tiers it may evict; only strictly
    lower tiers are allowed. `min_run_s` is the minimum run time of a run before it
    may be preempted (Slurm PreemptExemptTime, KAI preemptMinRuntime). `grace_s` is
    the time between the preemption signal and the kill (Slurm GraceTime): a job
    that supports it writes a final checkpoint at the signal and exits once it is
    saved. `requeue_hold_s` is the forced wait of a requeued victim before it is
    eligible again (Slurm's requeue delay). `victim_order` is how the victims are
    chosen among the eligible runs: "priority" as schedulers do today (lowest tier,
    then youngest run), or "cost": the set with the least live cost
    (`sim_engine.victim_cost_gpu_s`), ties by today's order. `trigger_wait_s` is the
    article's trigger threshold written down in advance: a job may preempt only once it
    has waited that long since it became eligible (0: at once, as schedulers do today).
    """

    enabled: bool = True
    may_preempt: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: _frozen(
            {"critical": ("high", "normal", "low"), "high": ("normal", "low"), "normal": (), "low": ()}
        )
    )
    min_run_s: float = 600.0
    grace_s: float = 60.0
    requeue_hold_s: float = 120.0
    victim_order: str = "priority"
    # The scheduler whose victim choice is modelled, and that choice's own settings (engine.py).
    scheduler: str = "generic"
    queue_order: str = "eligible"
    # Whether a blocked job gets a reserved start that lower jobs may not delay (BACKFILLS; engine.py).
    backfill: str = "reserve"
    # How far ahead a reserved start may be (Slurm's bf_window): a blocked job that cannot start within it gets
    # no reservation, and the jobs below it take whatever fits (inf: any time ahead).
    backfill_window_s: float = math.inf
    # Slurm (PreemptParameters, before 23.02 SchedulerParameters preempt_*): candidates youngest first instead of
    # by job order; passes that reorder the candidates to preempt fewer jobs; keep the order strict; jobs whose
    # priority is above min_exempt_priority are never preempted.
    youngest_first: bool = False
    reorder_count: int = 1
    strict_order: bool = False
    min_exempt_priority: float | None = None
    # Slurm requeues a victim only when its grace time is over: one that saved at the signal still holds its GPUs
    # until then (a job that exits on its own in the grace time is not requeued). Kubernetes frees them at exit.
    kill_at_grace_end: bool = False
    # Seconds from a change other than a submission (GPUs let go, a run eligible again or old enough to evict)
    # to the scheduler's pass that acts on it (a submission is scheduled at once): Slurm's epilog and cycle.
    latency_s: float = 0.0
    # Seconds from a submission to the scheduler's pass that sees it (a job starts, or signals its victims, no
    # earlier): slurmctld's reply to sbatch and its first pass.
    submit_latency_s: float = 0.0
    # Seconds between the scheduler's passes that no event triggers (Slurm: the shorter of sched_interval and
    # bf_interval; both passes preempt). Nothing wakes the scheduler when a run turns old enough to evict: a
    # preemptor waiting for that acts at the next such pass (on this grid from the replay's start), or at an
    # event's pass before it. 0: `latency_s` after the run turns old enough, as after an event.
    pass_interval_s: float = 0.0
    # Per victim tier (Slurm QOS PreemptExemptTime, partition or QOS GraceTime; KAI Queue preemptMinRuntime):
    # overrides of min_run_s and grace_s for that tier's victims.
    min_run_by_tier: Mapping[str, float] = field(default_factory=lambda: _frozen_values({}))
    grace_by_tier: Mapping[str, float] = field(default_factory=lambda: _frozen_values({}))
    # Preempt only once the preemptor has waited this long since it became eligible (the article's trigger).
    trigger_wait_s: float = 0.0
    # One of preemptlens's actions in force (Protection), acting as it does around the scheduler's own victim order.
    protection: Protection | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.victim_order not in VICTIM_ORDERS:
            problems.append(f"victim_order must be one of {', '.join(VICTIM_ORDERS)}, not {self.victim_order!r}")
        if self.scheduler not in SCHEDULER_MODELS:
            problems.append(f"scheduler must be one of {', '.join(SCHEDULER_MODELS)}, not {self.scheduler!r}")
        if self.queue_order not in QUEUE_ORDERS:
            problems.append(f"queue_order must be one of {', '.join(QUEUE_ORDERS)}, not {self.queue_order!r}")
        if self.backfill not in BACKFILLS:
            problems.append(f"backfill must be one of {', '.join(BACKFILLS)}, not {self.backfill!r}")
        if self.reorder_count < 0:
            problems.append("reorder_count must be >= 0")
        for name in ("min_run_by_tier", "grace_by_tier"):
            for tier, value in getattr(self, name).items():
                if tier not in TIER_RANK:
                    problems.append(f"{name}: unknown tier {tier!r}")
                elif value < 0:
                    problems.append(f"{name}[{tier}] must be >= 0")
        for preemptor, victims in self.may_preempt.items():
            if preemptor not in TIER_RANK:
                problems.append(f"may_preempt: unknown tier {preemptor!r}")
                continue
            for victim in victims:
                if victim not in TIER_RANK:
                    problems.append(f"may_preempt[{preemptor}]: unknown tier {victim!r}")
                elif TIER_RANK[victim] >= TIER_RANK[preemptor]:
                    problems.append(f"may_preempt[{preemptor}]: {victim} is not a lower tier")
        for name in ("min_run_s", "grace_s", "requeue_hold_s", "latency_s", "submit_latency_s", "trigger_wait_s",
                     "backfill_window_s", "pass_interval_s"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0")
        if problems:
            raise ConfigError("invalid preemption policy: " + "; ".join(problems))

    def victims_of(self, tier: str) -> frozenset[str]:
        return frozenset(self.may_preempt.get(tier, ())) if self.enabled else frozenset()

    def min_run_of(self, tier: str) -> float:
        """The minimum run time before a run of `tier` may be preempted."""
        return float(self.min_run_by_tier.get(tier, self.min_run_s))

    def grace_of(self, tier: str) -> float:
        """The time between the signal and the kill of a victim of `tier`."""
        return float(self.grace_by_tier.get(tier, self.grace_s))


@dataclass(frozen=True)
class PolicyChange:
    """From `at_s` seconds after the start on, `pools` run under `policy` (and near-completion protection
    `protect_share`, None for none): turning preemption on in a pilot, or changing one of its rules.

    The same seed simulated without the change is the pilot's counterfactual: the two runs differ only
    in what the change did, so their difference is the true effect.
    """

    at_s: float
    pools: tuple[str, ...]
    policy: PolicyConfig
    protect_share: float | None = None


@dataclass(frozen=True)
class TeamSpec:
    name: str
    weight: float
    # Absolute growth per week of this team's high-tier share of submissions.
    high_share_growth: float = 0.0


DEFAULT_TEAMS: tuple[TeamSpec, ...] = (
    TeamSpec("vision", 3.0, high_share_growth=0.08),
    TeamSpec("llm", 4.0, high_share_growth=0.06),
    TeamSpec("speech", 2.0),
    TeamSpec("recsys", 2.0),
    TeamSpec("research", 3.0),
    TeamSpec("platform", 1.0),
)


@dataclass(frozen=True)
class WorkloadConfig:
    """What gets submitted. Every random choice comes from `seed`."""

    seed: int = 7
    # Offered load as a share of capacity (GPU-seconds of work submitted / GPU-seconds available).
    load: float = 0.85
    teams: tuple[TeamSpec, ...] = DEFAULT_TEAMS
    critical_share: float = 0.02
    high_share: float = 0.10
    high_share_max: float = 0.60
    # Of what is neither critical nor high, the share that is low tier; the rest is normal.
    low_share: float = 0.40
    preemptible_share: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({"critical": 0.0, "high": 0.2, "normal": 0.7, "low": 1.0})
    )
    # GPUs per job and their weights: heavy-tailed, 1 to 64.
    sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    size_weights: tuple[float, ...] = (0.40, 0.15, 0.14, 0.18, 0.07, 0.04, 0.02)
    # Work (uninterrupted run time) is lognormal: median and sigma, clipped.
    work_median_s: float = 5400.0
    work_sigma: float = 1.2
    work_min_s: float = 300.0
    work_max_s: float = 3 * 86400.0
    # Daily rhythm: arrival rate peaks at `peak_hour` UTC; weekends are quieter.
    rhythm_amplitude: float = 0.6
    peak_hour: float = 14.0
    weekend_factor: float = 0.6
    checkpoint_share: float = 0.75
    checkpoint_intervals_s: tuple[float, ...] = (900.0, 1800.0, 3600.0)
    # Share of checkpointing jobs that save a final checkpoint when signalled.
    final_checkpoint_share: float = 0.5
    save_s_range: tuple[float, float] = (10.0, 60.0)
    warmup_s_range: tuple[float, float] = (60.0, 600.0)
    # A first run's start-up; (0, 0) draws none (and leaves every other draw as it was).
    startup_s_range: tuple[float, float] = (0.0, 0.0)
    # Jobs that hold GPUs while idle (notebooks, stalled jobs).
    hoarding_share: float = 0.06
    hoard_active_s_range: tuple[float, float] = (1200.0, 7200.0)
    hoard_idle_s_range: tuple[float, float] = (1800.0, 4 * 3600.0)
    fail_share: float = 0.01

    def __post_init__(self) -> None:
        problems = []
        if len(self.sizes) != len(self.size_weights):
            problems.append("sizes and size_weights differ in length")
        if not self.teams:
            problems.append("at least one team is needed")
        for name in ("critical_share", "high_share", "low_share", "checkpoint_share", "hoarding_share",
                     "final_checkpoint_share", "fail_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                problems.append(f"{name} must be between 0 and 1")
        if self.load <= 0:
            problems.append("load must be > 0")
        if set(self.preemptible_share) != set(TIERS):
            problems.append(f"preemptible_share needs exactly the tiers {', '.join(TIERS)}")
        if problems:
            raise ConfigError("invalid workload: " + "; ".join(problems))


@dataclass(frozen=True)
class SimConfig:
    cluster: str = "sim"
    start: datetime = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday, so weeks line up
    days: float = 7.0
    pools: tuple[PoolSpec, ...] = (PoolSpec("gpu", nodes=8),)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    # Scheduled policy changes (pilots), in force from their time on in their pools.
    changes: tuple[PolicyChange, ...] = ()
    sample_step_s: int = 60
    # Share of host-hours with no samples at all (exporter down). Off by default:
    # with gaps, sample-derived figures no longer match the truth exactly.
    sample_gap_share: float = 0.0
    # Whether the scheduler's run records name the preemptor and the reason; False is a
    # black-box scheduler, whose victims cannot see why they were preempted.
    records_preemptor: bool = True

    def __post_init__(self) -> None:
        problems = []
        if self.start.tzinfo is None:
            problems.append("start must be timezone-aware")
        if self.days <= 0:
            problems.append("days must be > 0")
        if not self.pools or any(p.nodes <= 0 or p.gpus_per_node <= 0 for p in self.pools):
            problems.append("every pool needs nodes > 0 and gpus_per_node > 0")
        if len({p.name for p in self.pools}) != len(self.pools):
            problems.append("pool names must be unique")
        if self.sample_step_s <= 0 or 86400 % self.sample_step_s:
            problems.append("sample_step_s must divide a day")
        if not 0.0 <= self.sample_gap_share < 1.0:
            problems.append("sample_gap_share must be in [0, 1)")
        names = {p.name for p in self.pools}
        for change in self.changes:
            unknown = sorted(set(change.pools) - names)
            if unknown or not change.pools:
                problems.append(
                    f"policy change at {change.at_s:g} s: pools {unknown or '(none)'} are not in the cluster"
                )
            if not 0.0 <= change.at_s <= self.days * 86400.0:
                problems.append(f"policy change at {change.at_s:g} s: outside the simulated days")
        if problems:
            raise ConfigError("invalid simulation: " + "; ".join(problems))

    @property
    def horizon_s(self) -> float:
        return round(self.days * 86400.0)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)


def cluster_of(gpus: int, gpus_per_node: int = 8, pools: int = 1) -> tuple[PoolSpec, ...]:
    """Pools of whole nodes adding up to about `gpus` GPUs (at least one node each)."""
    nodes = max(pools, round(gpus / gpus_per_node))
    base, extra = divmod(nodes, pools)
    names = ("a100", "h100", "l40s", "a10")
    return tuple(
        PoolSpec(names[i] if i < len(names) else f"pool{i}", base + (1 if i < extra else 0), gpus_per_node)
        for i in range(pools)
    )


@dataclass(frozen=True)
class JobSpec:
    """One job as the scheduler core sees it: everything it needs, nothing random.

    Replays build these from recorded jobs. `hoard_active_s`/`hoard_idle_s` make a
    job alternate between doing work and holding its GPUs idle; idle stretches
    start on the sample grid. `fail_after_work_s` makes the first run fail once it
    has done that much work.
    """

    job_id: str
    tier: str
    preemptible: bool
    pool: str
    gpus: int
    submit_s: float
    work_s: float
    team: str | None = None
    user: str | None = None
    name: str | None = None
    priority_class: str | None = None
    priority_value: float | None = None
    checkpoint_interval_s: float | None = None
    # A cadence that changes with the run's age, as (from seconds of work since the run's restore point, interval
    # seconds), ascending from 0: the checkpoint advice drawn from the preemption hazard by run age. Empty: every
    # `checkpoint_interval_s`.
    checkpoint_schedule: tuple[tuple[float, float], ...] = ()
    final_checkpoint: bool = False
    save_s: float = 30.0
    # A first run's start-up (start to its first progress) and a restart's warm-up (reload to resumed progress):
    # no useful work is done in either.
    startup_s: float = 0.0
    warmup_s: float = 0.0
    hoard_active_s: float | None = None
    hoard_idle_s: float | None = None
    fail_after_work_s: float | None = None
    # The time limit a scheduler plans the job's runs with (Slurm's backfill: a run ends by its start plus its
    # limit); inf: none (Slurm UNLIMITED: it plans the run to end in a year); None: unknown, the run is planned
    # for the work it has left (engine.py, `_planned_end`).
    time_limit_s: float | None = None
    # How hard the job drives its GPUs while working, and the memory it holds.
    busy_level: float = 0.8
    mem_mib: float = 40_000.0

    @property
    def hoards(self) -> bool:
        return self.hoard_active_s is not None and self.hoard_idle_s is not None
