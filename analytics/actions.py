"""Actions: hold expensive victims back from preemption, from their live cost (issue 20, part 2).

Three actions, each off by default and each in `dry-run` (audit rows only) or
`enforce` mode:

- `kueue_boost`: a Kueue Workload gets a priority boost (effective priority =
  priority + boost) through the `kueue.x-k8s.io/priority-boost` annotation,
  which Kueue v0.17.0 and later read with the feature gate `PriorityBoost`
  (alpha, off by default; KEP-7990; no release has a typed field), in steps
  of `boost_step` up to `max_boost`, one step per change;
- `kai_protect`: a KAI PodGroup is made non-preemptible;
- `slurm_protect`: a Slurm job waiting to restart after a preemption moves to
  a non-preemptible QOS, so its next run is not thrown away again; slurmctld
  changes a job's QOS only while it is pending, so it cannot protect a running
  job, and a protected job keeps the QOS until it ends or waits again.

Every cycle, per action: the live costs (the newest computation at or before the
cycle's instant) name the running jobs; a job is held when its cost or near-completion share reaches the high
mark, and released when both fall below the low mark (hysteresis), never before
`min_hold_s` so victims do not flap; a job that ended, whose live cost went
stale, that reached `max_hold_s`, or (Slurm) that checkpointed since its hold
began is released at once. Caps: at most `max_jobs` jobs, and at most
`max_pool_share` of a pool's GPUs held at once, so critical work can still
preempt; the costliest jobs are held first. An unknown cost or share never
holds a job.

The audit table `actions` is the engine's memory: a row is written (and
committed) before the scheduler is changed, and closed after the change is
removed. In enforce mode each cycle first compares the open rows with what the
scheduler holds (`Effector.held`): a row the scheduler does not hold is closed,
a hold no open row accounts for (a crash between the change and the audit) is
undone. So a crash never leaves a job held for good: the next start finds it.

The engine never imports a collector: the shell builds the effectors from the
registry (preemptlens.registry.EFFECTORS) and hands them in.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import duckdb
import polars as pl

from preemptlens.analytics.simulator.model import Protection
from preemptlens.config import Config, section, setting
from preemptlens.contract import Effector
from preemptlens.errors import ConfigError, PreemptlensError
from preemptlens.reading.words import duration, gpu_hours, pct

if TYPE_CHECKING:
    from preemptlens.warehouse import Warehouse

log = logging.getLogger(__name__)

MODES = ("dry-run", "enforce")
# serve.actions_interval_s's default: how often an action acts, for a replay that is not told otherwise.
DEFAULT_CYCLE_S = 300.0
# The undo_why of a release at max_hold_s starts so; such a job is not held again for max_hold_s.
MAX_HOLD = "reached max_hold_s"
# The undo_why of a hold the scheduler refused; the job is tried again after min_hold_s.
APPLY_FAILED = "apply failed"


_HELP = {
    "cost_high_gpu_s": "Hold a job whose live cost (GPU-seconds a preemption now would throw away) reaches this; "
                       "unset: the cost does not hold jobs.",
    "cost_low_gpu_s": "Release a held job once its live cost falls below this (and its near-completion share below "
                      "near_completion_low); unset: cost_high_gpu_s.",
    "near_completion_high": "Hold a job whose near-completion share (work done / work needed) reaches this; unset: "
                            "the share does not hold jobs.",
    "near_completion_low": "Release a held job once its near-completion share falls below this (and its cost below "
                           "cost_low_gpu_s); unset: near_completion_high.",
    "max_pool_share": "At most this share of a pool's GPUs held at once, so critical work can still preempt; below 1 "
                      "a pool of unknown capacity gets no holds.",
    "max_hold_s": "A hold ends after this long whatever the cost, and the job is not held again by this action for "
                  "as long.",
}


@dataclass(frozen=True)
class ActionSettings:
    """The settings every action has; each action's section (below) is a subclass that sets its own defaults.
    A protection has one level; only the Kueue boost has steps."""

    name: ClassVar[str]
    # How a reader's page or report names the action (its `name` is the setting's section, shown as code).
    title: ClassVar[str]
    scheduler: ClassVar[str]
    source: ClassVar[str]  # the jobs.source its jobs are loaded from
    enabled: bool = setting(False, "Run this action at all.")
    mode: str = setting("dry-run", "dry-run: write the audit rows only, change nothing in the scheduler; enforce: "
                        "change the scheduler too.", choices=MODES)
    cost_high_gpu_s: float | None = setting(28_800.0, _HELP["cost_high_gpu_s"])
    cost_low_gpu_s: float | None = setting(14_400.0, _HELP["cost_low_gpu_s"])
    near_completion_high: float | None = setting(None, _HELP["near_completion_high"], bounds=(0, 1))
    near_completion_low: float | None = setting(None, _HELP["near_completion_low"], bounds=(0, 1))
    max_jobs: int = setting(20, "At most this many jobs held by this action at once.", bounds=(0, 100_000))
    max_pool_share: float = setting(0.25, _HELP["max_pool_share"])
    min_hold_s: float = setting(1800.0, "A hold (or a boost step) lasts at least this long before the hysteresis "
                                "may release (or step) it, so victims do not flap; a hold the scheduler refused is "
                                "tried again after as long.", bounds=(0, 30 * 86_400))
    max_hold_s: float = setting(86_400.0, _HELP["max_hold_s"], bounds=(60, 366 * 86_400))
    release_after_checkpoint: bool = setting(False, "Release a held job once it has checkpointed since its hold "
                                             "began (what it would lose is then small).")
    stale_after_s: float = setting(1800.0, "A job whose live cost is older than this is taken as no longer running: "
                                   "its hold is released.", bounds=(60, 30 * 86_400))
    clusters: list[str] = setting([], "Clusters this action acts in; empty: all (enforce: the effector's cluster).")
    pools: list[str] = setting([], "Pools this action acts in; empty: all. Name them when Kueue and KAI run in one "
                               "cluster, since both load their jobs as source kubernetes.")

    # The scheduler changes a job only while it waits (Slurm: a pending job's QOS): held are victims waiting
    # to restart, judged by the last live cost they had, and a job is released only while it waits or once
    # it ended, never while it runs.
    while_waiting: ClassVar[bool] = False
    boost_step: ClassVar[int] = 1
    max_boost: ClassVar[int] = 1

    @property
    def enforce(self) -> bool:
        return self.mode == "enforce"

    def replayed(self, cycle_s: float = DEFAULT_CYCLE_S, **changed: Any) -> Protection:
        """This action as the replay runs it (simulator model.Protection), every `cycle_s` (serve's
        actions_interval_s), with `changed` settings (a mark the suggestion tries)."""
        s = replace(self, **changed) if changed else self
        return Protection(s.name, s.cost_high_gpu_s, s.cost_low_gpu_s, s.near_completion_high, s.near_completion_low,
                          s.max_jobs, s.max_pool_share, s.min_hold_s, s.max_hold_s, s.release_after_checkpoint,
                          cycle_s, s.boost_step, s.max_boost)

    def __post_init__(self) -> None:
        # An unset low mark is the high mark (no hysteresis band).
        if self.cost_low_gpu_s is None:
            object.__setattr__(self, "cost_low_gpu_s", self.cost_high_gpu_s)
        if self.near_completion_low is None:
            object.__setattr__(self, "near_completion_low", self.near_completion_high)
        name, problems = self.name, []
        if self.enabled and self.cost_high_gpu_s is None and self.near_completion_high is None:
            problems.append(f"{name}: set cost_high_gpu_s or near_completion_high, or nothing is ever held")
        if (self.cost_high_gpu_s is not None and self.cost_low_gpu_s is not None
                and self.cost_low_gpu_s > self.cost_high_gpu_s):
            problems.append(f"{name}.cost_low_gpu_s: must not exceed cost_high_gpu_s (the release mark is the lower)")
        if (self.near_completion_high is not None and self.near_completion_low is not None
                and self.near_completion_low > self.near_completion_high):
            problems.append(f"{name}.near_completion_low: must not exceed near_completion_high")
        if not 0 < self.max_pool_share <= 1:
            problems.append(f"{name}.max_pool_share: expected a share above 0 and at most 1")
        if self.boost_step < 1 or self.max_boost < self.boost_step:
            problems.append(f"{name}: expected boost_step >= 1 and max_boost >= boost_step")
        if self.max_jobs < 0 or self.min_hold_s < 0 or self.max_hold_s <= 0 or self.stale_after_s <= 0:
            problems.append(f"{name}: max_jobs and min_hold_s must be >= 0, max_hold_s and stale_after_s > 0")
        if problems:
            raise ConfigError("actions: " + "; ".join(problems), "see docs/configuration.md")


_Action = TypeVar("_Action", bound=ActionSettings)


def _action(name: str, title: str, scheduler: str, source: str, what: str) -> Callable[[type[_Action]], type[_Action]]:
    """Declare an action: `name` is its settings section too, and `what` says what it changes."""

    def declare(declared: type[_Action]) -> type[_Action]:
        declared.name, declared.title, declared.scheduler, declared.source = name, title, scheduler, source
        return section(name, f"Action `{name}` ({what}); run by `preemptlens act` and serve's `actions` job "
                             "(docs/figures.md, Actions).")(declared)

    return declare


@_action("kueue_boost", "Kueue priority boost", "kueue", "kubernetes",
         "Kueue: a Workload's priority boost, the `kueue.x-k8s.io/priority-boost` annotation of Kueue v0.17.0 and "
         "later, feature gate PriorityBoost")
@dataclass(frozen=True)
class KueueBoostSettings(ActionSettings):
    max_pool_share: float = setting(1.0, _HELP["max_pool_share"])
    boost_step: int = setting(  # type: ignore[misc]  # a setting here, one level for a protection
        100, "The boost moves in steps of this (one step per change): a job gets one step per multiple of "
        "cost_high_gpu_s its cost reaches.",
        bounds=(1, 1_000_000),
    )
    max_boost: int = setting(  # type: ignore[misc]
        500, "The largest boost ever set (Kueue adds it to the Workload's priority, and it can cross priority "
        "classes).",
        bounds=(1, 1_000_000_000),
    )


@_action("kai_protect", "KAI non-preemptible hold", "kai", "kubernetes",
         "KAI-Scheduler: a PodGroup made non-preemptible")
@dataclass(frozen=True)
class KaiProtectSettings(ActionSettings):
    cost_high_gpu_s: float | None = setting(None, _HELP["cost_high_gpu_s"])
    cost_low_gpu_s: float | None = setting(None, _HELP["cost_low_gpu_s"])
    near_completion_high: float | None = setting(0.9, _HELP["near_completion_high"], bounds=(0, 1))
    near_completion_low: float | None = setting(0.85, _HELP["near_completion_low"], bounds=(0, 1))
    max_hold_s: float = setting(21_600.0, _HELP["max_hold_s"], bounds=(60, 366 * 86_400))


@_action("slurm_protect", "Slurm protected-QOS hold", "slurm", "slurm",
         "Slurm preempt/qos: a victim waiting to restart moved to a non-preemptible QOS, judged by its live cost when "
         "it was preempted")
@dataclass(frozen=True)
class SlurmProtectSettings(ActionSettings):
    while_waiting = True


SETTINGS = (KueueBoostSettings, KaiProtectSettings, SlurmProtectSettings)
ACTIONS = {s.name: s for s in SETTINGS}


def settings_from(config: Config) -> dict[str, ActionSettings]:
    """Every action's settings, by name."""
    return {name: config.of(declared) for name, declared in ACTIONS.items()}


# -- one cycle -----------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    cluster: str
    job_id: str
    pool: str | None
    gpus: int
    computed_at: datetime | None
    cost_gpu_s: float | None
    near_completion_share: float | None
    ended: bool
    # Waiting to restart after a preemption (while_waiting actions): the figures are its last live cost.
    waiting: bool = False


def _recorded_detail(action: str, row_id: int, raw: str | None) -> dict[str, str] | None:
    """What an apply recorded for its undo (an object of texts), or None, as if nothing had been recorded, when
    the audit row holds anything else: the effector's undo then restores its documented default, and checks
    what it is given as its apply checks what it reads."""
    if not raw:
        return None
    try:
        detail = json.loads(raw)
    except ValueError:
        detail = None
    if isinstance(detail, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in detail.items()):
        return detail
    log.warning("%s: actions row %s: detail is not an object of texts; undone as if nothing was recorded",
                action, row_id)
    return None


@dataclass
class Held:
    id: int
    cluster: str
    job_id: str
    level: int
    mode: str
    applied_at: datetime
    held_since: datetime
    detail: dict[str, str] | None


@dataclass
class ActionReport:
    action: str
    mode: str
    applied: list[str] = field(default_factory=list)
    stepped: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    reconciled: list[str] = field(default_factory=list)
    capped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    # Why no job could be held this cycle (empty when one could).
    none_eligible: str = ""

    def summary(self) -> str:
        parts = [f"{len(getattr(self, k))} {k}" for k in
                 ("applied", "stepped", "released", "reconciled", "capped", "failed") if getattr(self, k)]
        text = f"{self.action} ({self.mode}): " + (", ".join(parts) if parts else "no change")
        return f"{text}; {self.none_eligible}" if self.none_eligible else text


def _gpu_h(gpu_s: float) -> str:
    return gpu_hours(gpu_s / 3600)


# Each job's last run, as both queries below read it (the one definition of whether it ended or waits).
_LAST_RUNS = """
WITH last_run AS (
    SELECT cluster, job_id, state, start_time, end_time,
           bool_or(state IN ('preempted', 'requeued')) OVER (PARTITION BY cluster, job_id) AS preempted_before
    FROM job_runs
    QUALIFY run = max(run) OVER (PARTITION BY cluster, job_id)
)
"""
# The running jobs' live costs at the cycle's instant, and whether the job's last run ended: the latest
# computation (live_costs_latest), unless it lies after the instant (`cost --at` a later one, `act --now` an
# earlier one: it says nothing of what ran then); then the newest computation at or before the instant.
_LIVE_SQL = """
, at_now AS (
    SELECT * FROM live_costs_latest WHERE computed_at <= CAST($now AS TIMESTAMPTZ)
    UNION ALL
    SELECT * FROM live_costs
    WHERE NOT EXISTS (SELECT 1 FROM live_costs_latest WHERE computed_at <= CAST($now AS TIMESTAMPTZ))
      AND computed_at = (SELECT max(computed_at) FROM live_cost_computations
                         WHERE computed_at <= CAST($now AS TIMESTAMPTZ))
)
SELECT lc.cluster, lc.job_id, coalesce(lc.pool, j.pool) AS pool, coalesce(lc.gpus, j.gpus) AS gpus,
       lc.computed_at, lc.cost_gpu_s, lc.near_completion_share,
       coalesce(w.end_time IS NOT NULL, false) AS ended, false AS waiting
FROM at_now lc
JOIN jobs j ON j.cluster = lc.cluster AND j.job_id = lc.job_id
LEFT JOIN last_run w ON w.cluster = lc.cluster AND w.job_id = lc.job_id
WHERE j.source = $source
"""
# Jobs waiting to restart after a preemption (within max_hold_s of it), with the last live cost they had (when
# they were preempted); taken as computed now, since its age says nothing about whether the job still waits.
_WAITING_SQL = """
SELECT lc.cluster, lc.job_id, coalesce(lc.pool, j.pool) AS pool, coalesce(lc.gpus, j.gpus) AS gpus,
       CAST($now AS TIMESTAMPTZ) AS computed_at, lc.cost_gpu_s, lc.near_completion_share,
       false AS ended, true AS waiting
FROM last_run w
JOIN jobs j ON j.cluster = w.cluster AND j.job_id = w.job_id
JOIN live_costs lc ON lc.cluster = w.cluster AND lc.job_id = w.job_id
WHERE j.source = $source AND lc.computed_at <= CAST($now AS TIMESTAMPTZ) AND (
    -- Slurm's accounting shows no run for the attempt that waits: the last run is the preempted one
    (w.state IN ('preempted', 'requeued') AND w.end_time > CAST($since AS TIMESTAMPTZ))
    OR (w.state = 'pending' AND w.start_time IS NULL AND w.preempted_before))
QUALIFY row_number() OVER (PARTITION BY lc.cluster, lc.job_id ORDER BY lc.computed_at DESC) = 1
"""


class _Cycle:
    def __init__(self, wh: Warehouse, s: ActionSettings, bound: tuple[str, Effector] | None, now: datetime) -> None:
        self.wh, self.s, self.now = wh, s, now
        # The effector's cluster; in enforce mode the action acts in it alone.
        self.effector_cluster: str | None = bound[0] if bound is not None else None
        self.effector: Effector | None = bound[1] if bound is not None else None
        self.cluster = self.effector_cluster if s.enforce else None
        self.report = ActionReport(s.name, s.mode)
        self.released: set[tuple[str, str]] = set()
        # What live() read: the computation's instant (None: no computation at or before now), and how many of
        # its jobs lie outside the action's clusters and pools.
        self.computed_at: datetime | None = None
        self.out_of_scope = 0

    # -- reading ---------------------------------------------------------------

    def _in_scope(self, cluster: str, pool: str | None) -> bool:
        if self.cluster is not None and cluster != self.cluster:
            return False
        if self.s.clusters and cluster not in self.s.clusters:
            return False
        return not self.s.pools or pool in self.s.pools

    def live(self) -> dict[tuple[str, str], Live]:
        try:
            # A job that waits again still has its running days' row among the latest: the waiting row wins.
            if self.s.while_waiting:
                rows = self.wh.query(f"{_LAST_RUNS} {_LIVE_SQL} UNION ALL {_WAITING_SQL} ORDER BY waiting",
                                     {"source": self.s.source, "now": self.now,
                                      "since": self.now - timedelta(seconds=self.s.max_hold_s)})
            else:
                rows = self.wh.query(f"{_LAST_RUNS} {_LIVE_SQL}", {"source": self.s.source, "now": self.now})
            instants = rows.filter(~pl.col("waiting"))["computed_at"].to_list()
            self.computed_at = max(instants) if instants else self.wh.con.execute(
                "SELECT max(computed_at) FROM live_cost_computations WHERE computed_at <= $now", {"now": self.now}
            ).fetchall()[0][0]
        except duckdb.CatalogException:
            # No live cost yet: no job is known to be running, so nothing is held and every hold is released.
            log.warning("%s: no live costs in the warehouse (run `preemptlens cost`)", self.s.name)
            return {}
        found = {}
        for r in rows.iter_rows(named=True):
            if not self._in_scope(r["cluster"], r["pool"]):
                self.out_of_scope += 1
                continue
            found[(r["cluster"], r["job_id"])] = Live(
                r["cluster"], r["job_id"], r["pool"], int(r["gpus"] or 0), r["computed_at"], r["cost_gpu_s"],
                r["near_completion_share"], bool(r["ended"]), bool(r["waiting"]))
        return found

    def open_rows(self) -> list[Held]:
        rows = self.wh.query(
            "SELECT id, cluster, job_id, level, mode, applied_at, held_since, detail FROM actions "
            "WHERE action = $a AND undone_at IS NULL ORDER BY id",
            {"a": self.s.name},
        )
        return [
            Held(r["id"], r["cluster"], r["job_id"], r["level"], r["mode"], r["applied_at"], r["held_since"],
                 _recorded_detail(self.s.name, r["id"], r["detail"]))
            for r in rows.iter_rows(named=True)
            if self.cluster is None or r["cluster"] == self.cluster
        ]

    def last_checkpoints(self) -> dict[tuple[str, str], datetime]:
        rows = self.wh.query(
            "SELECT cluster, job_id, max(time) AS t FROM checkpoints WHERE kind = 'checkpoint' AND time <= $now "
            "GROUP BY ALL", {"now": self.now})
        return {(r["cluster"], r["job_id"]): r["t"] for r in rows.iter_rows(named=True)}

    def capacity(self) -> dict[tuple[str, str], int]:
        rows = self.wh.query(
            "SELECT cluster, pool, arg_max(gpus, valid_from) AS gpus FROM pools WHERE valid_from <= $now GROUP BY ALL",
            {"now": self.now})
        return {(r["cluster"], r["pool"]): int(r["gpus"]) for r in rows.iter_rows(named=True)}

    def cooling(self) -> set[tuple[str, str]]:
        """Jobs not held again yet: released at max_hold_s within the last max_hold_s, or whose apply failed
        within the last min_hold_s (a refused patch is retried that often, not every cycle)."""
        rows = self.wh.query(
            "SELECT DISTINCT cluster, job_id FROM actions WHERE action = $a AND ("
            "(undo_why LIKE $max_hold AND undone_at > $since) OR (undo_why LIKE $failed AND undone_at > $retry))",
            {"a": self.s.name, "max_hold": f"{MAX_HOLD}%", "since": self.now - timedelta(seconds=self.s.max_hold_s),
             "failed": f"{APPLY_FAILED}%", "retry": self.now - timedelta(seconds=self.s.min_hold_s)})
        return {(r["cluster"], r["job_id"]) for r in rows.iter_rows(named=True)}

    # -- writing ---------------------------------------------------------------

    def _insert(self, cluster: str, job_id: str, level: int, why: str, cost: float | None,
                held_since: datetime, detail: dict[str, str] | None = None, undo_why: str | None = None) -> int:
        with self.wh.transaction():
            row = self.wh.con.execute(
                "INSERT INTO actions (action, scheduler, cluster, job_id, level, mode, why, cost_gpu_s, applied_at, "
                "held_since, undone_at, undo_why, detail) VALUES ($action, $scheduler, $cluster, $job, $level, "
                "$mode, $why, $cost, $now, $since, $undone, $undo_why, $detail) RETURNING id",
                {"action": self.s.name, "scheduler": self.s.scheduler, "cluster": cluster, "job": job_id,
                 "level": level, "mode": self.s.mode, "why": why, "cost": cost, "now": self.now,
                 "since": held_since, "undone": self.now if undo_why else None, "undo_why": undo_why,
                 "detail": json.dumps(detail, sort_keys=True) if detail is not None else None},
            ).fetchone()
        self.wh.mark_changed()
        assert row is not None
        return int(row[0])

    def _close(self, row_id: int, why: str) -> None:
        with self.wh.transaction():
            self.wh.con.execute("UPDATE actions SET undone_at = $now, undo_why = $why WHERE id = $id",
                                {"now": self.now, "why": why, "id": row_id})
        self.wh.mark_changed()

    def _set_detail(self, row_id: int, detail: dict[str, str]) -> None:
        with self.wh.transaction():
            self.wh.con.execute("UPDATE actions SET detail = $d WHERE id = $id",
                                {"d": json.dumps(detail, sort_keys=True), "id": row_id})

    # -- the rules ---------------------------------------------------------------

    def reaches_high(self, live: Live) -> str | None:
        """Why the job is to be held, or None."""
        s = self.s
        if s.cost_high_gpu_s is not None and live.cost_gpu_s is not None and live.cost_gpu_s >= s.cost_high_gpu_s:
            return f"live cost {_gpu_h(live.cost_gpu_s)} >= {s.name}.cost_high_gpu_s ({_gpu_h(s.cost_high_gpu_s)})"
        share = live.near_completion_share
        if s.near_completion_high is not None and share is not None and share >= s.near_completion_high:
            return f"near-completion share {share:.2f} >= {s.name}.near_completion_high ({s.near_completion_high:g})"
        return None

    def stays_above_low(self, live: Live) -> bool:
        s = self.s
        if s.cost_low_gpu_s is not None and live.cost_gpu_s is not None and live.cost_gpu_s >= s.cost_low_gpu_s:
            return True
        share = live.near_completion_share
        return s.near_completion_low is not None and share is not None and share >= s.near_completion_low

    def level_for(self, live: Live) -> int:
        """The level a job's figures call for: one boost step per multiple of the high mark, up to max_boost."""
        s = self.s
        steps = 1
        if s.cost_high_gpu_s and live.cost_gpu_s is not None:
            steps = max(1, math.floor(live.cost_gpu_s / s.cost_high_gpu_s))
        return min(s.max_boost, s.boost_step * steps) // s.boost_step * s.boost_step

    def fresh(self, live: Live) -> bool:
        return live.computed_at is not None and live.computed_at >= self.now - timedelta(seconds=self.s.stale_after_s)

    def release_reason(self, row: Held, live: Live | None,
                       checkpoints: Mapping[tuple[str, str], datetime]) -> str | None:
        s = self.s
        if live is None:
            return "the job has no live cost: it ended or is not running"
        if live.ended:
            return "the job ended"
        if s.while_waiting and not live.waiting:
            return None  # running: the scheduler cannot change it now (it is released once it waits or ends)
        if not self.fresh(live):
            when = "at an unknown time" if live.computed_at is None else f"{live.computed_at:%Y-%m-%d %H:%M} UTC"
            return f"its live cost is stale (computed {when}, stale_after_s)"
        if (self.now - row.held_since).total_seconds() >= s.max_hold_s:
            return f"{MAX_HOLD} ({duration(s.max_hold_s)})"
        checkpoint = checkpoints.get((row.cluster, row.job_id))
        if s.release_after_checkpoint and checkpoint is not None and checkpoint > row.held_since:
            return f"it checkpointed at {checkpoint:%Y-%m-%d %H:%M} UTC"
        if (self.now - row.applied_at).total_seconds() >= s.min_hold_s and not self.stays_above_low(live):
            cost = "unknown" if live.cost_gpu_s is None else _gpu_h(live.cost_gpu_s)
            share = "unknown" if live.near_completion_share is None else f"{live.near_completion_share:.2f}"
            return f"below the low marks (live cost {cost}, near-completion share {share})"
        return None

    def why_none_eligible(self, live: Mapping[tuple[str, str], Live], held: set[tuple[str, str]],
                          cooling: set[tuple[str, str]]) -> str:
        """Why no job of the live costs can be held this cycle, counted by the first rule each one fails."""
        s, now = self.s, f"{self.now:%Y-%m-%d %H:%M} UTC"
        if self.computed_at is None:
            return (f"no job is eligible: no live cost was computed at or before {now} "
                    "(run `preemptlens cost`, or serve's cost job)")
        at = f"{self.computed_at:%Y-%m-%d %H:%M} UTC"
        scope = f" ({self.out_of_scope} more outside {s.name}.clusters/pools)" if self.out_of_scope else ""
        if not live:
            others = sorted(str(r[0]) for r in self.wh.con.execute(
                "SELECT DISTINCT j.source FROM live_costs lc JOIN jobs j USING (cluster, job_id) "
                "WHERE lc.computed_at = $t AND j.source <> $source", {"t": self.computed_at, "source": s.source},
            ).fetchall())
            loaded = f"; its jobs were loaded from {', '.join(others)}" if others else ""
            return (f"no job is eligible: no job loaded from {s.source} ran at the live-cost computation of "
                    f"{at}{scope}{loaded}")
        marks = []
        if s.cost_high_gpu_s is not None:
            marks.append(f"{s.name}.cost_high_gpu_s = {_gpu_h(s.cost_high_gpu_s)}")
        if s.near_completion_high is not None:
            marks.append(f"{s.name}.near_completion_high = {pct(s.near_completion_high)}")
        counted: dict[str, int] = {}
        for job in live.values():
            key = (job.cluster, job.job_id)
            known = ((s.cost_high_gpu_s is not None and job.cost_gpu_s is not None)
                     or (s.near_completion_high is not None and job.near_completion_share is not None))
            if key in held:
                why = "held already"
            elif key in self.released:
                why = "released in this cycle"
            elif key in cooling:
                why = "released lately (not held again within max_hold_s, or min_hold_s after a refused hold)"
            elif job.ended:
                why = "ended"
            elif not self.fresh(job):
                why = (f"computed more than {s.name}.stale_after_s ({duration(s.stale_after_s)}) before {now}; "
                       f"`--now {self.computed_at:%Y-%m-%dT%H:%M:%SZ}` evaluates as of that computation")
            elif s.while_waiting and not job.waiting:
                why = "running (this action holds only victims waiting to restart)"
            elif not known:
                why = "of unknown live cost" + (" and near-completion share" if s.near_completion_high else "")
            else:
                costs = [j.cost_gpu_s for j in live.values() if j.cost_gpu_s is not None]
                top = f"; the costliest is {_gpu_h(max(costs))}" if costs and s.cost_high_gpu_s is not None else ""
                why = f"below {' and '.join(marks)}{top}"
            counted[why] = counted.get(why, 0) + 1
        parts = [f"{n} {why}" for why, n in sorted(counted.items(), key=lambda c: -c[1])]
        return (f"no job is eligible: of the {len(live)} job(s) in the live costs computed at {at}{scope}, "
                + "; ".join(parts))

    # -- the steps ---------------------------------------------------------------

    def reconcile(self, rows: list[Held]) -> list[Held]:
        """Compare the open enforce rows with what the scheduler holds; return the rows still held."""
        assert self.effector is not None and self.effector_cluster is not None
        held = self.effector.held()
        kept: list[Held] = []
        for row in rows:
            level = held.get(row.job_id)
            if level != row.level:
                shown = "nothing" if not level else f"level {level}"
                self._close(row.id, f"not held by the scheduler (it holds {shown}); closed at reconcile")
                self.report.reconciled.append(row.job_id)
            else:
                kept.append(row)
        accounted = {r.job_id for r in kept}
        for job_id, level in sorted(held.items()):
            if job_id in accounted:
                continue
            # A mark no open row accounts for: the process died between the change and the audit.
            try:
                self.effector.undo(job_id, {})
            except PreemptlensError as exc:
                log.error("%s: cannot undo the unrecorded hold of %s: %s", self.s.name, job_id, exc)
                self.report.failed.append(job_id)
                continue
            why = f"found marked by preemptlens at level {level} with no open audit row"
            self._insert(self.effector_cluster, job_id, level, why, None, self.now, {},
                         "released at reconcile: the hold was not recorded")
            self.report.reconciled.append(job_id)
        return kept

    def release(self, row: Held, why: str, *, again: bool = False) -> bool:
        """Undo a hold and close its row; `again`: the job may be held anew in this cycle."""
        if row.mode == "enforce":
            assert self.effector is not None
            try:
                self.effector.undo(row.job_id, row.detail or {})
            except PreemptlensError as exc:
                log.error("%s: cannot release %s: %s", self.s.name, row.job_id, exc)
                self.report.failed.append(row.job_id)
                return False
        self._close(row.id, why)
        self.report.released.append(row.job_id)
        if not again:
            # Not held again in the same cycle, on the figures it was just released on.
            self.released.add((row.cluster, row.job_id))
        return True

    def hold(self, live: Live, level: int, why: str, held_since: datetime,
             carried: dict[str, str] | None = None) -> bool:
        row_id = self._insert(live.cluster, live.job_id, level, why, live.cost_gpu_s, held_since, carried)
        if not self.s.enforce:
            return True
        assert self.effector is not None
        try:
            detail = self.effector.apply(live.job_id, level)
        except PreemptlensError as exc:
            log.error("%s: cannot hold %s: %s", self.s.name, live.job_id, exc)
            self._close(row_id, f"{APPLY_FAILED}: {exc.message}")
            self.report.failed.append(live.job_id)
            return False
        # A step keeps what the first apply returned: undo restores the state from before the hold.
        self._set_detail(row_id, {**detail, **(carried or {})})
        return True

    def run(self) -> ActionReport:
        s = self.s
        rows = self.open_rows()
        if not s.enabled:
            # Disabled with holds still open (it enforced before): release them all, hold nothing new.
            for row in rows:
                if row.mode == "dry-run" or row.cluster == self.effector_cluster:
                    self.release(row, "the action was disabled")
            return self.report
        live = self.live()
        # Rows of the other mode (the mode was changed): a dry-run row never held anything; an enforce row
        # is released through the effector, or kept open when there is none to release it with.
        for row in [r for r in rows if r.mode != s.mode]:
            if row.mode == "dry-run":
                self._close(row.id, f"mode changed to {s.mode}")
            elif row.cluster == self.effector_cluster:
                self.release(row, f"mode changed to {s.mode}", again=True)
        rows = [r for r in rows if r.mode == s.mode]
        if s.enforce:
            rows = self.reconcile(rows)
        checkpoints = self.last_checkpoints()
        kept: list[Held] = []
        for row in rows:
            job = live.get((row.cluster, row.job_id))
            why = self.release_reason(row, job, checkpoints)
            if why is None:
                kept.append(row)
            elif not self.release(row, why):
                kept.append(row)
        # Kueue boosts follow the cost one step at a time, no more often than min_hold_s.
        if s.max_boost > s.boost_step:
            for row in kept:
                job = live.get((row.cluster, row.job_id))
                if job is None:  # its release failed above: it stays as it is
                    continue
                target = self.level_for(job)
                if target == row.level or (self.now - row.applied_at).total_seconds() < s.min_hold_s:
                    continue
                new = min(target, row.level + s.boost_step) if target > row.level else max(
                    target, row.level - s.boost_step)
                cost = "unknown" if job.cost_gpu_s is None else _gpu_h(job.cost_gpu_s)
                why = f"boost stepped from {row.level} to {new}: live cost {cost} calls for {target}"
                self._close(row.id, f"stepped to {new}")
                if self.hold(job, new, why, row.held_since, row.detail):
                    row.level = new
                    self.report.stepped.append(row.job_id)
        # New holds, costliest first, within the caps.
        capacity = self.capacity()
        cooling = self.cooling()
        held_ids = {(r.cluster, r.job_id) for r in kept}
        pool_held: dict[tuple[str, str | None], int] = {}
        for row in kept:
            job = live.get((row.cluster, row.job_id))
            if job is not None:
                pool_held[(job.cluster, job.pool)] = pool_held.get((job.cluster, job.pool), 0) + job.gpus
        count = len(kept)
        candidates = [
            (job, why) for job in live.values()
            if (job.cluster, job.job_id) not in held_ids and (job.cluster, job.job_id) not in cooling
            and (job.cluster, job.job_id) not in self.released and not job.ended and self.fresh(job)
            and (job.waiting or not s.while_waiting)
            and (why := self.reaches_high(job)) is not None
        ]
        candidates.sort(key=lambda c: (-(c[0].cost_gpu_s or 0.0), -(c[0].near_completion_share or 0.0),
                                       c[0].cluster, c[0].job_id))
        if not candidates:
            self.report.none_eligible = self.why_none_eligible(live, held_ids, cooling)
        for job, why in candidates:
            if count >= s.max_jobs:
                self.report.capped.append(job.job_id)
                log.info("%s: %s not held: max_jobs (%d) are held", s.name, job.job_id, s.max_jobs)
                continue
            key = (job.cluster, job.pool)
            if s.max_pool_share < 1:
                gpus = capacity.get((job.cluster, job.pool)) if job.pool is not None else None
                if gpus is None or gpus <= 0:
                    self.report.capped.append(job.job_id)
                    log.info("%s: %s not held: the capacity of pool %s is unknown", s.name, job.job_id, job.pool)
                    continue
                if pool_held.get(key, 0) + job.gpus > s.max_pool_share * gpus:
                    self.report.capped.append(job.job_id)
                    log.info("%s: %s not held: pool %s would have more than %g of its %d GPUs held", s.name,
                             job.job_id, job.pool, s.max_pool_share, gpus)
                    continue
            # A hold starts at the first step and climbs one step per min_hold_s (a protection has one level).
            level = s.boost_step
            if s.max_boost > s.boost_step:
                why += f"; boost {level} (first step; at most {s.max_boost})"
            if self.hold(job, level, why, self.now):
                count += 1
                pool_held[key] = pool_held.get(key, 0) + job.gpus
                self.report.applied.append(job.job_id)
        return self.report


def run(wh: Warehouse, actions: Mapping[str, ActionSettings], effectors: Mapping[str, tuple[str, Effector]],
        now: datetime) -> list[ActionReport]:
    """One cycle of every enabled action. `effectors` maps an action to (its cluster, its effector); an action
    in enforce mode without one is a configuration error the shell reports before calling this."""
    reports = []
    leftover = open_enforced(wh)
    for name, s in actions.items():
        if not s.enabled and name not in leftover:
            continue
        bound = effectors.get(name)
        if s.enabled and s.enforce and bound is None:
            raise ConfigError(f"{name}: mode is enforce but no effector was built for it",
                              "check the registry's EFFECTORS and the scheduler's connection settings")
        if bound is None and name in leftover:
            log.warning("%s: enforced holds are open but no effector could be built to release them", name)
        # In dry-run (or disabled) the effector only releases holds an earlier enforce mode left open.
        try:
            report = _Cycle(wh, s, bound, now).run()
        except PreemptlensError as exc:
            # The scheduler could not be read (held): nothing is decided on a partial picture this cycle.
            log.error("%s: skipped this cycle: %s", name, exc)
            report = ActionReport(name, s.mode, failed=["(the scheduler could not be read)"])
        log.info("%s", report.summary())
        reports.append(report)
    return reports


def open_enforced(wh: Warehouse) -> set[str]:
    """Actions with enforced holds still open: they need their effector even when disabled or in dry-run."""
    rows = wh.query("SELECT DISTINCT action FROM actions WHERE mode = 'enforce' AND undone_at IS NULL")
    return set(rows["action"].to_list())


# The hold an action last put on a job at or before a moment (a preemption): one definition for the victim
# notices (analytics/alerts.py) and the victim's view (dashboards/data.py). Column names are constants.
HOLD_COLUMNS = ("h.action AS hold_action, h.mode AS hold_mode, h.level AS hold_level, h.why AS hold_why, "
                "h.held_since AS hold_since, h.undone_at AS hold_undone_at, h.undo_why AS hold_undo_why")


def hold_join(cluster: str, job_id: str, time: str) -> str:
    """`ASOF LEFT JOIN` of the latest actions row of (cluster, job_id) applied at or before `time` (column
    expressions of the outer query) as `h`."""
    return f"ASOF LEFT JOIN actions AS h ON h.cluster = {cluster} AND h.job_id = {job_id} AND {time} >= h.applied_at"


_VERBS = {"kueue_boost": ("boosted", "boost"), "kai_protect": ("protected", "protection"),
          "slurm_protect": ("protected", "protection")}


def hold_text(r: Mapping[str, Any], at: datetime) -> str | None:
    """What a victim is told about the hold (HOLD_COLUMNS) at the moment `at` it was preempted; None: no hold."""
    if r.get("hold_action") is None:
        return None
    done, noun = _VERBS.get(str(r["hold_action"]), ("held", "hold"))
    level = f" at level {r['hold_level']}" if r["hold_action"] == "kueue_boost" else ""
    since = f"{r['hold_since']:%Y-%m-%d %H:%M} UTC"
    if r["hold_mode"] == "dry-run":
        head = (f"preemptlens would have {done} it{level} from {since} "
                f"({r['hold_action']}, dry-run: nothing was changed)")
    else:
        head = f"preemptlens {done} it{level} from {since} ({r['hold_action']})"
    ended = r["hold_undone_at"]
    if ended is None or ended > at:
        tail = f"the {noun} was in force when it was preempted" if r["hold_mode"] == "enforce" else ""
    else:
        tail = f"the {noun} ended at {ended:%Y-%m-%d %H:%M} UTC, before the preemption: {r['hold_undo_why']}"
    return f"{head} because {r['hold_why']}" + (f"; {tail}" if tail else "")
