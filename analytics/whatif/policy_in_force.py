"""The preemption policy in force: configured, else read from the scheduler, else inferred from the ledger.

The replay runs the scheduler's own rules, so it reads them where the scheduler states them: the
`scheduler_policy` snapshot in force over most of the window (written by the Slurm collector from `scontrol show
config`, partitions and QOS; by the Kubernetes collector from Kueue ClusterQueues and KAI Queues; by the simulator
from its own policy). Settings of `[tuning]` win over it; only what neither gives is inferred from the ledger, and
every value is reported with where it came from (`PolicyBasis.describe`).

Scheduler facts (from their sources, see docs/tuning.md):
- Slurm: PreemptExemptTime is the minimum run before a job may be preempted (QOS value, else the global one),
  never a grace time; with preempt/partition_prio and GANG it holds a job that would be suspended only from
  Slurm 26.05 on (`_gang_exempt`); GraceTime (partition with preempt/partition_prio, QOS with preempt/qos) is
  the time from SIGTERM to the kill, after which slurmctld requeues the job; a job that exits on its own in its
  grace time is not requeued. A requeued job keeps its priority (priority/basic: its submission order), so it
  keeps its place.
- Kueue: preempted Workloads are requeued at once, ordered by their creation time; withinClusterQueue
  LowerPriority lets a tier evict the tiers below it in its ClusterQueue.
- KAI: a PodGroup keeps its creation time; Queue preemptMinRuntime is the minimum run of its jobs; a PodGroup's
  preemptionDelay (v0.17.0 on) is how long it must wait, from its creation or last eviction, before it may evict
  others: the replay's trigger wait, counted from a run's eligible time (a requeued run's is its eviction).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import median
from types import MappingProxyType
from typing import Any

from preemptlens.analytics.simulator.model import PolicyConfig
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.contract import TIER_RANK, TIERS
from preemptlens.errors import ConfigError
from preemptlens.warehouse import Warehouse, query_sql

# Minimum run times administrators set; an inferred one is rounded down to the nearest of these, since the
# youngest victim seen is only an upper bound of the real value.
_EXEMPT_LADDER_S = (0.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 7200.0)
# Settings of PolicyConfig a snapshot or [tuning] may give, in the order they are reported.
_REPORTED = ("scheduler", "enabled", "may_preempt", "min_run_s", "min_run_by_tier", "grace_s", "grace_by_tier",
             "requeue_hold_s", "latency_s", "submit_latency_s", "pass_interval_s", "queue_order", "backfill",
             "backfill_window_s",
             "youngest_first",
             "reorder_count",
             "strict_order",
             "min_exempt_priority", "kill_at_grace_end", "trigger_wait_s")


@dataclass(frozen=True)
class PolicyBasis:
    """The policy in force and, per setting, where it came from (configured, read from the scheduler, inferred
    or assumed, with the evidence)."""

    policy: PolicyConfig
    basis: Mapping[str, str]
    # The scheduler that stated the policy ("" when none did), when its snapshot was read, and notes on it.
    stated_by: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The spread of the measured scheduling latency (its quartiles), within which the replay's intervals vary it.
    latency_range: tuple[float, float] | None = None
    # The scheduler's version where it states one (Slurm's SLURM_VERSION), "" otherwise.
    version: str = ""
    # Likewise for the latency from a submission to the scheduler acting on it.
    submit_latency_range: tuple[float, float] | None = None

    def kind(self, name: str) -> str:
        """configured | scheduler | inferred | assumed."""
        return self.basis.get(name, "assumed").split(" ", 1)[0].rstrip(":")

    def describe(self) -> str:
        """Every setting with its value and where it came from, for the notes of every replay."""
        parts = []
        for name in _REPORTED:
            if name in self.basis:
                parts.append(f"{name} {_shown(getattr(self.policy, name))} ({self.basis[name]})")
        return "; ".join(parts)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g} s" if value == value else "nan"
    if isinstance(value, Mapping):
        if not value:
            return "none"
        return "{" + ", ".join(f"{k}: {_shown(v) if not isinstance(v, tuple) else '/'.join(v) or '-'}"
                               for k, v in sorted(value.items(), key=lambda kv: -TIER_RANK.get(kv[0], 0))) + "}"
    return "none" if value is None else str(value)


def policy_in_force(wh: Warehouse, window: Window, configured: TuningSettings, half_resolution_s: float = 0.0
                    ) -> PolicyBasis:
    """Configured values win, then the scheduler's stored snapshot, then inference from the ledger (with times
    recorded in whole seconds, `half_resolution_s` 0.5, taken at the middle of their second)."""
    params = {"c": window.cluster, "t0": window.start, "t1": window.end}
    values: dict[str, Any] = {}
    basis: dict[str, str] = {}
    notes: list[str] = []
    rows = wh.query(query_sql("replay", "stored_policy"), params).to_dicts()
    stated_by = version = ""
    if rows:
        stated_by = str(rows[0]["scheduler"])
        version = next((str(r["value"]) for r in rows if r["scope"] == "cluster" and r["setting"] == "version"), "")
        read_at = rows[0]["valid_from"]
        notes.append(f"policy read from {stated_by} at {read_at.isoformat()}"
                     + (" (after the window's start: assumed in force since before it)" if read_at > window.start
                        else ""))
        if rows[0]["changes_inside"]:
            notes.append(f"the policy changed {rows[0]['changes_inside']} time(s) inside the window: replayed "
                         "under the one in force over most of it")
        stated, stated_notes = _STATED[stated_by](rows) if stated_by in _STATED else ({}, [
            f"{stated_by}'s policy rows are not modelled"])
        notes.extend(stated_notes)
        for name, (value, why) in stated.items():
            values[name], basis[name] = value, f"{stated_by}: {why}"
    _configured(configured, values, basis)
    latency_range, submit_range = _infer(wh, params, values, basis, half_resolution_s)
    try:
        policy = PolicyConfig(**{k: _frozen(v) for k, v in values.items()})
    except ConfigError as exc:
        raise ConfigError(str(exc), "check [tuning] may_preempt, min_run_s, grace_s, requeue_hold_s") from None
    return PolicyBasis(policy, MappingProxyType(basis), stated_by, tuple(notes), latency_range, version, submit_range)


def _frozen(value: Any) -> Any:
    return MappingProxyType(dict(value)) if isinstance(value, dict) else value


def _configured(configured: TuningSettings, values: dict[str, Any], basis: dict[str, str]) -> None:
    for name in ("min_run_s", "grace_s", "requeue_hold_s"):
        given = float(getattr(configured, name))
        if given >= 0:
            values[name], basis[name] = given, f"configured ([tuning] {name})"
    if configured.backfill:
        values["backfill"], basis["backfill"] = configured.backfill, "configured ([tuning] backfill)"
    if configured.may_preempt:
        values["may_preempt"] = {t: tuple(configured.may_preempt.get(t, ())) for t in TIERS}
        basis["may_preempt"] = "configured ([tuning] may_preempt)"


def _infer(wh: Warehouse, params: dict[str, Any], values: dict[str, Any], basis: dict[str, str], half: float
           ) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """What neither the scheduler nor [tuning] says, from the window's preemptions; each with its evidence.
    Returns the measured latencies' quartiles (after GPUs let go, after a submission), when measured."""
    latency_range = None
    submit_range = None
    if "requeue_hold_s" not in values:
        hold = wh.query(query_sql("replay", "requeue_hold"), params)["hold"][0]
        if hold is None:
            values["requeue_hold_s"], basis["requeue_hold_s"] = 0.0, "assumed: no requeued run"
        else:
            values["requeue_hold_s"] = max(0.0, float(hold))
            basis["requeue_hold_s"] = "inferred: the shortest eligible - submit of a requeued run"
    if "grace_s" not in values:
        gaps = wh.query(query_sql("replay", "preemptor_start_gaps"), params).drop_nulls().to_dicts()
        grace, why = _grace_from([(float(g["gap"]), float(g["victim_age"])) for g in gaps if g["gap"] >= 0])
        values["grace_s"], basis["grace_s"] = grace, why
    if "min_run_s" not in values:
        # A victim that saved a final checkpoint ended save_s after the signal, any other one grace_s after.
        ages = wh.query(query_sql("replay", "victim_signal_ages"), {"c": params["c"], "t0": params["t0"],
                                                                     "t1": params["t1"], "g": values["grace_s"]}
                        )["signal_age"].drop_nulls().to_list()
        if ages:
            youngest = max(0.0, float(min(ages)))
            values["min_run_s"] = max(v for v in _EXEMPT_LADDER_S if v <= youngest)
            basis["min_run_s"] = (f"inferred: the youngest of {len(ages)} victims was {youngest:.0f} s old at its "
                                  "signal, rounded down to a usual setting")
        else:
            values["min_run_s"], basis["min_run_s"] = 0.0, "assumed: no preemption"
    if "latency_s" not in values:
        found = wh.query(query_sql("replay", "start_latency"), {**params, "h": half}).row(0, named=True)
        if found["latency"] is None:
            values["latency_s"], basis["latency_s"] = 0.0, "assumed: no run waited for GPUs let go"
        else:
            values["latency_s"] = round(float(found["latency"]), 2)
            latency_range = (float(found["low"]), float(found["high"]))
            basis["latency_s"] = (f"inferred: the median of {found['n']} waits from GPUs let go to the start of a "
                                  "run that waited for them")
    grace = max([float(values["grace_s"]), *(float(v) for v in values.get("grace_by_tier", {}).values())])
    if "submit_latency_s" not in values and grace and not values.get("kill_at_grace_end"):
        # A preemption's recorded time is its victim's end: after the grace time, or sooner for a victim that
        # saved and exited. How much sooner is not known, nor then how long the scheduler took to signal.
        values["submit_latency_s"] = 0.0
        basis["submit_latency_s"] = "assumed 0 s: victims end within their grace time, which hides it"
    if "submit_latency_s" not in values:
        found = wh.query(query_sql("replay", "submit_latency"), {**params, "m": values["min_run_s"], "h": half,
                                                                 "g": grace}).row(0, named=True)
        if found["latency"] is None:
            values["submit_latency_s"] = 0.0
            basis["submit_latency_s"] = "assumed: no preemptor that preempted as soon as it was submitted"
        else:
            values["submit_latency_s"] = round(float(found["latency"]), 2)
            basis["submit_latency_s"] = (f"inferred: the median of {found['n']} preemptors' waits from submission "
                                         "to their first victim's preemption")
            submit_range = (float(found["low"]), float(found["high"]))
    if "may_preempt" not in values:
        ledger = wh.query(query_sql("replay", "policy_ledger"), params)
        pairs = {
            (p, v)
            for p, v in zip(ledger["preemptor_tier"].to_list(), ledger["victim_tier"].to_list(), strict=True)
            if p is not None and v is not None and TIER_RANK[v] < TIER_RANK[p]
        }
        # A tier that outranks an observed preemptor may evict what that preemptor evicted.
        values["may_preempt"] = {
            t: tuple(
                v for v in TIERS if any(pv == v and TIER_RANK[pp] <= TIER_RANK[t] for pp, pv in pairs)
                and TIER_RANK[v] < TIER_RANK[t]
            )
            for t in TIERS
        }
        basis["may_preempt"] = (f"inferred: {len(pairs)} preemptor/victim tier pairs in the ledger" if pairs
                                else "assumed: no preemption with known tiers")
    return latency_range, submit_range


def _grace_from(gaps: list[tuple[float, float]]) -> tuple[float, str]:
    """The grace time from the preemptors' waits (eligible to start), with the evidence.

    A preemptor waits for the grace time, plus whatever minimum run time still held its victims: only waits
    whose victim had run longer than every wait seen, when the preemptor became eligible, show the grace time
    alone (victims that save a final checkpoint end early, any other one at the kill, so the most common such
    wait is the kill). Without such a wait, the shortest wait bounds it from above.
    """
    if not gaps:
        return 0.0, "assumed 0 s: no preemptor with a start"
    longest = max(g for g, _ in gaps)
    free = [round(g) for g, age in gaps if age >= longest]
    if free:
        value, count = Counter(free).most_common(1)[0]
        if count >= 3 or len(free) < 3:
            chosen = float(value)
        else:
            typical = median(free)
            chosen = float(max(g for g in free if g <= 3 * typical))
        return chosen, (f"inferred {chosen:g} s: the preemptors' waits whose victims no minimum run time held "
                        f"({len(free)} of {len(gaps)})")
    shortest = float(round(min(g for g, _ in gaps)))
    return shortest, f"inferred {shortest:g} s: the shortest of {len(gaps)} preemptors' waits"


# -- what each scheduler's snapshot says -------------------------------------------------------------------------


def _by(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, tuple[str, str]]]:
    found: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    for r in rows:
        found.setdefault((r["scope"], r["subject"]), {})[r["setting"]] = (str(r["value"]), str(r["raw"] or ""))
    return found


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 and value != float("inf") else None


def _per_tier(classes: dict[str, dict[str, tuple[str, str]]], setting: str, notes: list[str], what: str
              ) -> tuple[dict[str, float], str]:
    """A per-class setting as per tier (the classes' tiers from their `tier` rows), the largest where a tier's
    classes differ."""
    by_tier: dict[str, list[tuple[float, str]]] = {}
    for name, row in classes.items():
        tier = row.get("tier", ("", ""))[0]
        value = _seconds(row[setting][0]) if setting in row else None
        if tier in TIER_RANK and value is not None:
            by_tier.setdefault(tier, []).append((value, f"{name} {row[setting][1]}"))
    found = {}
    for tier, given in by_tier.items():
        values = {v for v, _ in given}
        if len(values) > 1:
            notes.append(f"{what}: the {tier} tier's classes differ ({', '.join(w for _, w in given)}); the "
                         "largest is replayed")
        found[tier] = max(values)
    why = ", ".join(w for given in by_tier.values() for _, w in given)
    return found, why


def _slurm(rows: list[dict[str, Any]]) -> tuple[dict[str, tuple[Any, str]], list[str]]:
    by = _by(rows)
    conf = by.get(("cluster", ""), {})
    notes: list[str] = []
    out: dict[str, tuple[Any, str]] = {"scheduler": ("slurm", "preemption plugins and select/cons_tres"),
                                       # SchedulerType is not collected; sched/backfill is Slurm's default.
                                       "backfill": ("reserve", "sched/backfill (the default SchedulerType): a "
                                                    "blocked job's start is reserved")}
    kind = conf.get("preempt_type", ("none", ""))[0]
    mode = conf.get("preempt_mode", ("OFF", ""))[0]
    out["enabled"] = (kind != "none" and mode != "OFF",
                      f"{conf.get('preempt_type', ('', 'PreemptType unset'))[1]}, "
                      f"{conf.get('preempt_mode', ('', 'PreemptMode unset'))[1]}")
    for name in ("min_run_s", "requeue_hold_s"):
        if name in conf and _seconds(conf[name][0]) is not None:
            out[name] = (_seconds(conf[name][0]), conf[name][1])
    # Backfill reserves a blocked job's start only within bf_window minutes (backfill.c, slurm-22-05-11-1); the
    # runs' planned ends come from the jobs' time limits (jobs.time_limit_s, read by the replay's workload).
    window = _seconds(conf.get("bf_window", ("", ""))[0])
    if window is not None:
        out["backfill_window_s"] = (window * 60.0, conf["bf_window"][1] + " (minutes)")
    # Nothing wakes slurmctld when a run's PreemptExemptTime ends (acct_policy.c only compares it when a pass
    # looks for victims): the next pass that no event triggers is the main one every sched_interval
    # (controller.c `_slurmctld_background`) or backfill's every bf_interval (backfill.c), whichever comes first;
    # both preempt (backfill's `_start_job` calls select_nodes). slurm-22-05-11-1.
    passes = [(value, conf[name][1]) for name in ("sched_interval", "bf_interval")
              if name in conf and (value := _seconds(conf[name][0]))]
    if passes:
        out["pass_interval_s"] = (min(value for value, _ in passes),
                                  "; ".join(raw for _, raw in passes) + " (the shorter)")
    for name in ("youngest_first", "strict_order"):
        if name in conf:
            out[name] = (conf[name][0] == "true", conf[name][1])
    if "reorder_count" in conf and conf["reorder_count"][0].isdigit():
        out["reorder_count"] = (int(conf["reorder_count"][0]), conf["reorder_count"][1])
    if "min_exempt_priority" in conf and _seconds(conf["min_exempt_priority"][0]) is not None:
        out["min_exempt_priority"] = (float(conf["min_exempt_priority"][0]), conf["min_exempt_priority"][1])
    priority = conf.get("priority_type", ("", ""))[0]
    age = _seconds(conf.get("priority_weight_age", ("0", ""))[0]) or 0.0
    if priority == "priority/multifactor" and age > 0:
        # The age factor counts from the requeued run's new eligible time.
        out["queue_order"] = ("eligible", f"{conf['priority_type'][1]} with PriorityWeightAge={age:g}: a requeued "
                              "job's age starts again")
    else:
        out["queue_order"] = ("submit", f"{conf.get('priority_type', ('', 'PriorityType unset'))[1]}: a requeued "
                              "job keeps its priority and its place")
    out["kill_at_grace_end"] = (True, "slurmctld requeues a victim when its grace time is over")
    # The classes whose tiers the collector derived: those that decide preemption, or without preemption those
    # that order the queue (partition PriorityTier, else QOS Priority: collectors/slurm/policy.py).
    scope = "qos" if kind == "qos" or (kind == "none" and any(
        sc == "qos" and "tier" in row for (sc, _), row in by.items())) else "partition"
    classes = {subject: row for (sc, subject), row in by.items() if sc == scope}
    grace, grace_why = _per_tier(classes, "grace_s", notes, "GraceTime")
    out["grace_s"] = (0.0, "no GraceTime outside partitions and QOS")
    if grace:
        out["grace_by_tier"] = (grace, grace_why)
    if scope == "qos":
        exempt, exempt_why = _per_tier(classes, "min_run_s", notes, "QOS PreemptExemptTime")
        if exempt:
            out["min_run_by_tier"] = (exempt, exempt_why)
    else:
        qos_exempt = [f"{subject} {row['min_run_s'][1]}" for (sc, subject), row in by.items()
                      if sc == "qos" and "min_run_s" in row]
        if qos_exempt:
            notes.append("QOS PreemptExemptTime not replayed with preempt/partition_prio (the jobs' QOS are not "
                         f"recorded): {', '.join(qos_exempt)}")
    _gang_exempt(conf, classes, kind, mode, out, notes)
    may = _may_preempt(classes, kind, scope)
    if may is not None:
        out["may_preempt"] = may
        if kind == "none":
            # What preemption would be once turned on (the counterfactual's question for this cluster).
            out["may_preempt"] = (may[0], f"PreemptType=preempt/none: if turned on, as the queue orders the tiers "
                                          f"({may[1]})")
    return out, notes


# The release from which PreemptExemptTime holds a job that preempt/partition_prio with GANG would suspend
# (SchedMD/slurm CHANGELOG/slurm-26.05.md, 26.05.0rc1: "PreemptExemptTime now also applies to
# PreemptMode=suspend,gang when running with preempt/partition_prio"; src/plugins/select/cons_tres/job_test.c
# `_add_exempt_cores` of slurm-26-05-0-1 keeps the cores of a SUSPEND-mode job inside its exempt time from the
# jobs that would suspend it, when the cluster's PreemptExemptTime is set). Before it the gang scheduler suspends
# them whatever their run (doc/html/preempt.shtml of slurm-25-11-7-1: with GANG and partition_prio "the
# controller will ignore PreemptExemptTime").
_SUSPEND_EXEMPT_SINCE = (26, 5)


def _release(text: str) -> tuple[int, int] | None:
    """(major, minor) of a SLURM_VERSION ("25.11.3"), None when it is not one."""
    parts = text.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def _gang_exempt(conf: dict[str, tuple[str, str]], classes: dict[str, dict[str, tuple[str, str]]], kind: str,
                 mode: str, out: dict[str, tuple[Any, str]], notes: list[str]) -> None:
    """Tiers whose jobs preempt/partition_prio with GANG suspends: no minimum run before Slurm 26.05."""
    exempt = out.get("min_run_s", (0.0, ""))[0]
    if kind != "partition_prio" or conf.get("gang", ("false", ""))[0] != "true" or not exempt:
        return
    suspended = sorted({row["tier"][0] for row in classes.values()
                        if row.get("tier", ("", ""))[0] in TIER_RANK
                        and row.get("preempt_mode", (mode, ""))[0] == "SUSPEND"})
    if not suspended:
        return
    version = conf.get("version", ("", ""))[0]
    release = _release(version)
    if release is None:
        notes.append(f"Slurm's version is not known: PreemptExemptTime ({exempt:g} s) is replayed for the "
                     f"suspended tiers ({', '.join(suspended)}), as Slurm 26.05 on applies it with GANG")
        return
    if release >= _SUSPEND_EXEMPT_SINCE:
        notes.append(f"Slurm {version} applies PreemptExemptTime to PreemptMode=SUSPEND,GANG (from 26.05): "
                     f"{', '.join(suspended)} held for {exempt:g} s")
        return
    out["min_run_by_tier"] = ({tier: 0.0 for tier in suspended},
                              f"Slurm {version}: PreemptExemptTime does not hold a job that PreemptMode=SUSPEND,GANG "
                              "suspends before 26.05 (the partitions of " + ", ".join(suspended) + ")")


def _may_preempt(classes: dict[str, dict[str, tuple[str, str]]], kind: str, scope: str
                 ) -> tuple[dict[str, tuple[str, ...]], str] | None:
    """Which tier may evict which, from the classes that decide it (higher PriorityTier, or QOS Preempt lists;
    without preemption, a higher PriorityTier or QOS Priority: what preemption would follow once on)."""
    tiers = {name: row["tier"][0] for name, row in classes.items() if row.get("tier", ("", ""))[0] in TIER_RANK}
    if not tiers:
        return None
    preemptible = {name: classes[name].get("preemptible", ("true", ""))[0] == "true" for name in tiers}
    may: dict[str, set[str]] = {t: set() for t in TIERS}
    for a, tier_a in tiers.items():
        for b, tier_b in tiers.items():
            if a == b or not preemptible[b] or TIER_RANK[tier_b] >= TIER_RANK[tier_a]:
                continue
            if kind == "qos":
                allowed = b in classes[a].get("preempts", ("", ""))[0].split(",")
            else:
                key = "priority_tier" if scope == "partition" else "priority"
                pa, pb = (_seconds(classes[x].get(key, ("", ""))[0]) for x in (a, b))
                allowed = pa is not None and pb is not None and pa > pb
            if allowed:
                may[tier_a].add(tier_b)
    why = ", ".join(f"{name} is {tier}" for name, tier in sorted(tiers.items()))
    return {t: tuple(v for v in TIERS if v in may[t]) for t in TIERS}, why


def _simulator(rows: list[dict[str, Any]]) -> tuple[dict[str, tuple[Any, str]], list[str]]:
    """The simulator states its own PolicyConfig (simulator.frames.policy_frame)."""
    by = _by(rows)
    conf = by.get(("cluster", ""), {})
    out: dict[str, tuple[Any, str]] = {}
    for name, (value, _raw) in conf.items():
        if name in ("min_run_s", "grace_s", "requeue_hold_s", "latency_s", "submit_latency_s", "pass_interval_s"):
            out[name] = (float(value), "its own setting")
        elif name in ("enabled", "youngest_first", "strict_order", "kill_at_grace_end"):
            out[name] = (value == "true", "its own setting")
        elif name == "reorder_count":
            out[name] = (int(value), "its own setting")
        elif name in ("scheduler", "queue_order", "victim_order", "backfill"):
            out[name] = (value, "its own setting")
    tiers = {subject: row for (scope, subject), row in by.items() if scope == "tier"}
    if tiers:
        out["may_preempt"] = ({t: tuple(v for v in tiers.get(t, {}).get("preempts", ("", ""))[0].split(",") if v)
                               for t in TIERS}, "its own setting")
    return out, []


def _kueue(rows: list[dict[str, Any]]) -> tuple[dict[str, tuple[Any, str]], list[str]]:
    """ClusterQueues' preemption policies (the most common one where they differ: pools are flavors here)."""
    by = _by(rows)
    queues = {subject: row for (scope, subject), row in by.items() if scope == "cluster_queue"}
    notes: list[str] = []
    out: dict[str, tuple[Any, str]] = {
        "scheduler": ("kueue", "pkg/scheduler/preemption candidate order, fill-back"),
        "queue_order": ("submit", "a preempted Workload keeps its creation time in the queue"),
        "kill_at_grace_end": (False, "an evicted pod lets its GPUs go when it exits"),
        "min_run_s": (0.0, "no minimum run before preemption in released Kueue (minAdmitDuration is proposed)"),
    }
    strategies = Counter(row.get("queueing_strategy", ("BestEffortFIFO", ""))[0] for row in queues.values())
    strategy = max(strategies.items(), key=lambda kv: kv[1])[0] if strategies else "BestEffortFIFO"
    # BestEffortFIFO lets a Workload that does not fit be passed (by priority, then age): greedy. StrictFIFO
    # blocks the queue at its head; the nearest model is the reservation, which still backfills.
    out["backfill"] = ("reserve", f"queueingStrategy {strategy}: the head blocks (replayed with backfill)") \
        if strategy == "StrictFIFO" else ("greedy", f"queueingStrategy {strategy}: a Workload that does not fit "
                                          "is passed by the next ones")
    if len(strategies) > 1:
        notes.append("ClusterQueues differ in queueingStrategy (" + ", ".join(f"{k} {v}" for k, v in
                     strategies.items()) + f"); replayed with {strategy}")
    within = Counter(row.get("within_cluster_queue", ("Never", ""))[0] for row in queues.values())
    reclaim = Counter(row.get("reclaim_within_cohort", ("Never", ""))[0] for row in queues.values())
    if not within:
        return out, notes
    # The most common; between equally common ones, one that preempts (the replay is of preemption).
    common, count = max(within.items(), key=lambda kv: (kv[1], kv[0] != "Never"))
    if len(within) > 1:
        notes.append("ClusterQueues differ in withinClusterQueue (" + ", ".join(f"{k} {v}" for k, v in
                     within.items()) + f"); replayed with {common}")
    if common == "LowerOrNewerEqualPriority":
        notes.append("withinClusterQueue LowerOrNewerEqualPriority also lets a newer Workload of equal priority be "
                     "preempted; the replay preempts lower tiers only")
    evicts = common != "Never"
    out["enabled"] = (evicts or any(k != "Never" for k in reclaim),
                      f"withinClusterQueue {common} on {count} of {len(queues)} ClusterQueues")
    if evicts:
        out["may_preempt"] = ({t: tuple(v for v in TIERS if TIER_RANK[v] < TIER_RANK[t]) for t in TIERS},
                              f"withinClusterQueue {common}: a lower priority may be preempted")
    if any(k != "Never" for k in reclaim):
        notes.append("reclaimWithinCohort between ClusterQueues is not replayed (pools are flavors): "
                     + ", ".join(f"{k} {v}" for k, v in reclaim.items()))
    return out, notes


def _kai(rows: list[dict[str, Any]]) -> tuple[dict[str, tuple[Any, str]], list[str]]:
    """KAI Queues' preemptMinRuntime (the most common among the queues that set one)."""
    by = _by(rows)
    notes: list[str] = []
    out: dict[str, tuple[Any, str]] = {
        "scheduler": ("kai", "actions/preempt, victims in reverse job order"),
        "queue_order": ("submit", "a PodGroup keeps its creation time"),
        "backfill": ("greedy", "actions/allocate goes on to the next PodGroup when one does not fit (no reserved "
                     "start)"),
        "kill_at_grace_end": (False, "an evicted pod lets its GPUs go when it exits"),
    }
    conf = by.get(("cluster", ""), {})
    delay = _seconds(conf.get("preemption_delay_s", ("", ""))[0])
    if delay is not None:
        if conf.get("preemption_delay_on", ("", ""))[0] == "all":
            out["trigger_wait_s"] = (delay, f"{conf['preemption_delay_s'][1]} on every PodGroup: a PodGroup evicts "
                                     "only once pending that long since its creation or last eviction")
        else:
            notes.append(f"{conf['preemption_delay_s'][1]} is set on some PodGroups only: not replayed (the replay's "
                         "trigger wait holds every job)")
    given = {subject: _seconds(row["min_run_s"][0]) for (scope, subject), row in by.items()
             if scope == "queue" and "min_run_s" in row}
    values = Counter(v for v in given.values() if v is not None)
    if values:
        common, count = values.most_common(1)[0]
        out["min_run_s"] = (common, f"preemptMinRuntime of {count} of {len(given)} queues that set one")
        if len(values) > 1:
            notes.append("KAI queues differ in preemptMinRuntime (" + ", ".join(
                f"{q} {v:g} s" for q, v in sorted(given.items()) if v is not None) + f"); replayed with {common:g} s")
    return out, notes


_STATED = {"slurm": _slurm, "simulator": _simulator, "kueue": _kueue, "kai": _kai}
