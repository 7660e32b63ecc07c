"""The what-if room's foot: its settings and the window it replays, which every module above reads.

Nothing here imports another module of analytics/whatif/, so the modules above it import one way:
policy_in_force <- replay <- victim_order, counterfactual <- scorecard <- tuning (tests/test_arrows.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from preemptlens.config import section, setting
from preemptlens.errors import ConfigError


@dataclass(frozen=True)
class Window:
    cluster: str
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@section("tuning", "What-if replay and the suggestions of `preemptlens suggest` (docs/tuning.md).")
@dataclass(frozen=True)
class TuningSettings:
    min_run_s: float = setting(
        -1.0,
        "Minimum run time before preemption in force (Slurm PreemptExemptTime, KAI preemptMinRuntime), "
        "seconds; negative infers it from the youngest victims.",
        bounds=(-1, 7 * 86_400),
    )
    grace_s: float = setting(
        -1.0,
        "Grace time between the preemption signal and the kill in force (Slurm GraceTime, "
        "terminationGracePeriodSeconds), seconds; negative infers it from the preemptors' starts.",
        bounds=(-1, 86_400),
    )
    requeue_hold_s: float = setting(
        -1.0,
        "Forced wait of a requeued victim in force, seconds; negative infers it from the runs' eligible times.",
        bounds=(-1, 7 * 86_400),
    )
    backfill: str = setting(
        "",
        "Backfill of the scheduler in force: \"reserve\" (a blocked job's start is reserved, Slurm's "
        "sched/backfill) or \"greedy\" (lower jobs take any GPUs that fit, Kueue BestEffortFIFO); empty takes "
        "what the scheduler states, else \"reserve\" (Slurm's SchedulerType is not collected: "
        "sched/backfill is assumed).",
        choices=("", "reserve", "greedy"),
    )
    may_preempt: dict[str, Any] = setting(
        {},
        "Which tiers each tier may preempt, e.g. { high = [\"normal\", \"low\"] }; empty infers it from the "
        "ledger's preemptor and victim tiers.",
    )
    validation_tolerance: float = setting(
        0.10,
        "Largest relative error of the replay under the actual policy (preemptions, lost GPU-hours, "
        "high-priority median wait) for it to count as reproducing the past.",
        bounds=(0, 10),
    )
    min_gain_share: float = setting(
        0.10,
        "Smallest cut in replayed lost GPU-hours, as a share of the actual policy's, for a replayed change "
        "to be suggested.",
    )
    max_wait_increase_s: float = setting(
        300.0,
        "Largest rise of the high-priority median queue wait (seconds) a suggested change may cost.",
        bounds=(0, 7 * 86_400),
    )
    min_run_candidates_s: list[float] = setting(
        [300.0, 600.0, 900.0, 1200.0, 1800.0, 3600.0],
        "Minimum run times (seconds) the sweep replays.",
        bounds=(1, 7 * 86_400),
    )
    early_victim_share_min: float = setting(
        0.2,
        "Share of victims preempted before analytics.early_victim_s (or within their warm-up) from which "
        "a minimum run time is considered.",
    )
    near_completion_lost_share_min: float = setting(
        0.1,
        "Share of lost GPU-hours from near-completion victims from which protecting them is considered.",
    )
    near_completion_candidates: list[float] = setting(
        [0.5, 0.75],
        "Shares of work done below analytics.near_completion_share from which the sweep also replays "
        "protecting victims.",
        bounds=(0, 1),
    )
    grace_candidates_s: list[float] = setting(
        [30.0, 60.0, 120.0, 300.0], "Grace times (seconds) the sweep replays.",
        bounds=(0, 86_400),
    )
    assumed_final_checkpoint_share: float = setting(
        0.5,
        "When the grace time in force is too short to see any final checkpoint, the share of checkpointing "
        "jobs assumed able to save one at the signal (stated as an assumption).",
    )
    checkpoint_cost_s: float = setting(
        30.0,
        "Checkpoint cost (seconds) assumed for a team with no measured final-checkpoint save time.",
        bounds=(0, 86_400),
    )
    checkpoint_ratio_min: float = setting(
        1.5,
        "Factor by which a team's checkpoint interval must differ from the Young/Daly optimum to be flagged.",
        bounds=(1, 1000),
    )
    min_preemptions: int = setting(
        5, "Fewest preemptions a per-team or per-tier rule needs as evidence.",
        bounds=(1, 1_000_000),
    )
    reclaim_warn_s: float = setting(
        1800.0, "Idle reclaim: warn the owner after this long at zero.",
        bounds=(60, 30 * 86_400),
    )
    reclaim_release_s: float = setting(
        3600.0, "Idle reclaim: release the GPUs after this long at zero.",
        bounds=(60, 30 * 86_400),
    )
    repeat_wait_ratio_min: float = setting(
        2.0,
        "Repeat victims' median queue time over that of unpreempted jobs of the same tiers from which "
        "compensation is suggested.",
        bounds=(1, 1000),
    )
    processes: int = setting(0, "Worker processes for replay sweeps; 0 uses every core.", bounds=(0, 256))
    jitter_replays: int = setting(
        8,
        "Replays with inputs jittered within their measurement error (whole-second times, the scheduler's "
        "latency) and the order of simultaneous events shuffled, behind every what-if's and every counterfactual "
        "net's interval (each scenario is replayed this many more times); 0 leaves the replay's sensitivity out.",
        bounds=(0, 200),
    )

    def __post_init__(self) -> None:
        problems = []
        for key, seconds in (("min_run_candidates_s", self.min_run_candidates_s),
                             ("grace_candidates_s", self.grace_candidates_s)):
            if not seconds or not all(isinstance(v, int | float) and v >= 0 for v in seconds):
                problems.append(f"tuning.{key}: expected a non-empty list of seconds >= 0")
        if not all(isinstance(v, int | float) and 0 < v < 1 for v in self.near_completion_candidates):
            problems.append("tuning.near_completion_candidates: expected a list of shares between 0 and 1")
        shares = {"validation_tolerance": self.validation_tolerance, "min_gain_share": self.min_gain_share,
                  "early_victim_share_min": self.early_victim_share_min,
                  "assumed_final_checkpoint_share": self.assumed_final_checkpoint_share,
                  "near_completion_lost_share_min": self.near_completion_lost_share_min}
        for key, share in shares.items():
            if not 0 <= share <= 1:
                problems.append(f"tuning.{key}: must be between 0 and 1")
        if self.reclaim_release_s < self.reclaim_warn_s:
            problems.append("tuning.reclaim_release_s: must be at least reclaim_warn_s")
        if problems:
            raise ConfigError("; ".join(problems), "see docs/configuration.md, section [tuning]")


@section(
    "victim_order",
    "Cost-aware victim choice replayed beside today's victim order by `preemptlens suggest`, as a bound "
    "(docs/tuning.md).",
)
@dataclass(frozen=True)
class VictimOrderSettings:
    compare: bool = setting(
        True,
        "Replay the recorded workload once more with victims chosen by least live cost and print its work "
        "thrown away, high-tier wait, victims per week and preemptions beside today's order, as a bound (if the "
        "scheduler could choose: no scheduler offers it); false skips that replay (it takes as long as the "
        "replay under the policy in force).",
    )


SETTINGS = (TuningSettings, VictimOrderSettings)
