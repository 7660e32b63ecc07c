"""Which tier a Slurm job belongs to and whether it may be preempted.

With `PreemptType=preempt/partition_prio` the partition's PriorityTier
decides, with `preempt/qos` the QOS `Preempt` lists (a QOS's Priority has
nothing to do with preemption). Without preemption (`preempt/none`) the
tiers come from what orders the queue: partition PriorityTier, else QOS
Priority, so that a cluster that does not preempt yet can ask what it would
gain (`Policy.ordering`). The facts come from `scontrol show
partition` and `sacctmgr show qos` where those answer; config overrides win:
`cluster.tiers` names the tier of a partition or QOS, `slurm.preemptible`
says whether it may be preempted.

Without an explicit tier, the highest PriorityTier (or a QOS that preempts
others and is preempted by none) is `high`, the lowest (a QOS others
preempt) is `low`, anything between `normal`; `critical` is only ever given
by config.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

PREEMPT_TYPES = ("auto", "partition_prio", "qos", "none")
# PreemptMode words that only qualify the mode.
_MODIFIERS = ("GANG", "WITHIN", "PRIORITY")


@dataclass(frozen=True)
class Partition:
    name: str
    priority_tier: int | None
    preempt_mode: str | None
    grace_s: float | None = None  # GraceTime (seconds from signal to kill)
    # DefaultTime (None: NONE) and MaxTime (inf: UNLIMITED/INFINITE) in seconds: a job that sets no time limit
    # gets DefaultTime, else MaxTime (src/slurmctld/job_mgr.c, slurm-22-05-11-1).
    default_time_s: float | None = None
    max_time_s: float | None = None

    @property
    def time_limit_s(self) -> float | None:
        """The limit of a job that sets none: DefaultTime, else MaxTime (inf: unlimited; None: not read)."""
        return self.default_time_s if self.default_time_s is not None else self.max_time_s


@dataclass(frozen=True)
class Qos:
    name: str
    preempt: tuple[str, ...]
    preempt_mode: str | None
    exempt_s: float | None = None  # PreemptExemptTime (minimum run before a job may be preempted)
    grace_s: float | None = None  # GraceTime
    priority: int | None = None


@dataclass
class Policy:
    preempt_type: str = "none"
    global_mode: str = "OFF"
    partitions: dict[str, Partition] = field(default_factory=dict)
    qos: dict[str, Qos] = field(default_factory=dict)
    tiers: Mapping[str, str] = field(default_factory=dict)
    default_tier: str = "normal"
    preemptible_tiers: tuple[str, ...] = ("low", "normal")
    preemptible_override: Mapping[str, bool] = field(default_factory=dict)
    # `scontrol show config`, key to value, as read (empty when it was not read).
    config: Mapping[str, str] = field(default_factory=dict)

    @property
    def ordering(self) -> str:
        """What the tiers come from: the classes that decide preemption (partitions with
        preempt/partition_prio, QOS with preempt/qos); without preemption, what orders the queue: partition
        PriorityTier (slurmctld sorts the queue by it first, src/slurmctld/job_scheduler.c), else QOS Priority
        (a factor of the job's priority), so that a cluster that does not preempt yet can ask what preemption
        would do."""
        if self.preempt_type in ("partition_prio", "qos"):
            return "partition" if self.preempt_type == "partition_prio" else "qos"
        if len({p.priority_tier for p in self.partitions.values() if p.priority_tier is not None}) >= 2:
            return "partition"
        if len({q.priority for q in self.qos.values() if q.priority is not None}) >= 2:
            return "qos"
        return "partition"

    def priority_class(self, partition: str | None, qos: str | None) -> str | None:
        return qos if self.ordering == "qos" else partition

    def tier(self, priority_class: str | None) -> str:
        if priority_class is not None and priority_class in self.tiers:
            return self.tiers[priority_class]
        derived = self._derived_tier(priority_class) if priority_class is not None else None
        return derived or self.default_tier

    def preemptible(self, priority_class: str | None, tier: str) -> bool:
        if priority_class is not None and priority_class in self.preemptible_override:
            return bool(self.preemptible_override[priority_class])
        if self.preempt_type == "partition_prio" and priority_class in self.partitions:
            part = self.partitions[priority_class]
            higher = any(
                p.priority_tier is not None and part.priority_tier is not None
                and p.priority_tier > part.priority_tier
                for p in self.partitions.values()
            )
            return higher and _mode(part.preempt_mode or self.global_mode) != "OFF"
        if self.preempt_type == "qos" and priority_class in self.qos:
            own = self.qos[priority_class]
            preempted_by_some = any(priority_class in q.preempt for q in self.qos.values())
            return preempted_by_some and _mode(own.preempt_mode or self.global_mode) != "OFF"
        if self.preempt_type == "none" and self._derived_tier(priority_class or "") is not None:
            # Nothing is preempted today: whether it could be once preemption is on, as the queue orders it.
            return self._ranked_below_another(priority_class or "")
        return tier in self.preemptible_tiers

    def _levels(self) -> tuple[dict[str, int], str]:
        """Each class's rank in the order that gives the tiers (PriorityTier or QOS Priority), and the scope."""
        if self.ordering == "qos":
            return {n: q.priority for n, q in self.qos.items() if q.priority is not None}, "qos"
        return {n: p.priority_tier for n, p in self.partitions.items() if p.priority_tier is not None}, "partition"

    def _ranked_below_another(self, name: str) -> bool:
        levels, _ = self._levels()
        return name in levels and any(v > levels[name] for v in levels.values())

    def _derived_tier(self, priority_class: str) -> str | None:
        if self.preempt_type == "none":
            ranks, _ = self._levels()
            if priority_class not in ranks or len(set(ranks.values())) < 2:
                return None
            ordered = sorted(set(ranks.values()))
            rank = ranks[priority_class]
            return "high" if rank == ordered[-1] else "low" if rank == ordered[0] else "normal"
        if self.preempt_type == "partition_prio" and priority_class in self.partitions:
            levels = sorted({p.priority_tier for p in self.partitions.values() if p.priority_tier is not None})
            own = self.partitions[priority_class].priority_tier
            if own is None or len(levels) < 2:
                return None
            return "high" if own == levels[-1] else "low" if own == levels[0] else "normal"
        if self.preempt_type == "qos" and priority_class in self.qos:
            preempts = bool(self.qos[priority_class].preempt)
            preempted = any(priority_class in q.preempt for q in self.qos.values())
            if preempts and not preempted:
                return "high"
            if preempted and not preempts:
                return "low"
            return "normal" if preempts or preempted else None
        return None


# A partition's and a QOS's stated settings as rows: (its attribute, the row's setting, how Slurm writes it).
_PARTITION_STATED = (
    ("priority_tier", "priority_tier", "PriorityTier={}"),
    ("preempt_mode", "preempt_mode", "PreemptMode={}"),
    ("grace_s", "grace_s", "GraceTime={:g}"),
    ("default_time_s", "default_time_s", "DefaultTime={:g} s"),
    ("max_time_s", "max_time_s", "MaxTime={:g} s"),
)
_QOS_STATED = (
    ("preempt_mode", "preempt_mode", "PreemptMode={}"),
    ("exempt_s", "min_run_s", "PreemptExemptTime={:g} s"),
    ("grace_s", "grace_s", "GraceTime={:g} s"),
    ("priority", "priority", "Priority={}"),
)


def policy_rows(policy: Policy) -> list[tuple[str, str, str, str, str]]:
    """The preemption settings in force as scheduler_policy rows (scope, subject, setting, value, raw).

    Facts as slurmctld applies them (src/slurmctld/preempt.c, acct_policy.c, job_mgr.c of 22.05-26.05):
    PreemptExemptTime is the minimum run before a job may be preempted (the job's QOS value, else the global
    one; NONE is none), never a grace time; GraceTime (of the partition with preempt/partition_prio, of the QOS
    with preempt/qos) is the time from SIGTERM to the kill; a requeued job may start again after the requeue
    delay (SchedulerParameters requeue_delay=, else AuthInfo cred_expire=, default 120 s) plus one second;
    PreemptParameters (before 23.02: SchedulerParameters preempt_*) youngest_first, reorder_count= (default
    1), strict_order, min_exempt_priority=.
    """
    conf = policy.config
    rows: list[tuple[str, str, str, str, str]] = []
    if not conf:
        return rows

    def add(scope: str, subject: str, setting: str, value: object, raw: str) -> None:
        text = ("true" if value else "false") if isinstance(value, bool) else (
            f"{value:g}" if isinstance(value, float) else str(value))
        rows.append((scope, subject, setting, text, raw))

    version = conf.get("SLURM_VERSION", "")
    if version:
        add("cluster", "", "version", version, f"SLURM_VERSION={version}")
    raw_type = conf.get("PreemptType", "")
    add("cluster", "", "preempt_type", policy.preempt_type, f"PreemptType={raw_type}")
    add("cluster", "", "preempt_mode", _mode(policy.global_mode), f"PreemptMode={policy.global_mode}")
    # GANG in the cluster's PreemptMode: with preempt/partition_prio the gang scheduler suspends a lower
    # partition's jobs (src/slurmctld/gang.c), and PreemptExemptTime holds a SUSPEND-mode job only from 26.05 on
    # (analytics/whatif/policy_in_force.py).
    add("cluster", "", "gang", "GANG" in _flags(policy.global_mode), f"PreemptMode={policy.global_mode}")
    exempt = conf.get("PreemptExemptTime", "")
    add("cluster", "", "min_run_s", slurm_duration_s(exempt) or 0.0, f"PreemptExemptTime={exempt}")
    sched = _words(conf.get("SchedulerParameters", ""))
    auth = _words(conf.get("AuthInfo", ""))
    if "requeue_delay" in sched:
        delay, raw = _number(sched["requeue_delay"]), f"SchedulerParameters requeue_delay={sched['requeue_delay']}"
    elif "cred_expire" in auth:
        delay, raw = _number(auth["cred_expire"]), f"AuthInfo cred_expire={auth['cred_expire']}"
    else:
        delay, raw = 120.0, "AuthInfo without cred_expire (default 120 s)"
    if delay is not None:
        add("cluster", "", "requeue_hold_s", delay + 1.0, raw + " (+1 s)")
    params = _words(conf.get("PreemptParameters", ""))
    old = {k.removeprefix("preempt_"): v for k, v in sched.items() if k.startswith("preempt_")}
    for name in ("youngest_first", "strict_order", "send_user_signal"):
        if name in params or name in old:
            given = "PreemptParameters" if name in params else f"SchedulerParameters preempt_{name}"
            add("cluster", "", name, True, given)
        else:
            add("cluster", "", name, False, "not in PreemptParameters or SchedulerParameters")
    if "reorder_count" in params or "reorder_count" in old:
        text = params.get("reorder_count") or old.get("reorder_count", "")
        count = _number(text)
        if count is not None:
            add("cluster", "", "reorder_count", int(count), f"reorder_count={text}")
    else:
        add("cluster", "", "reorder_count", 1, "reorder_count not set (default 1)")
    if "min_exempt_priority" in params:
        value = _number(params["min_exempt_priority"])
        if value is not None:
            add("cluster", "", "min_exempt_priority", value, f"min_exempt_priority={params['min_exempt_priority']}")
    # The scheduler's two passes (src/plugins/sched/backfill/backfill.c, src/slurmctld/job_scheduler.c of
    # slurm-22-05-11-1): backfill every bf_interval s (default 30) plans each blocked job's start from the
    # running jobs' time limits (an unlimited one ends in a year) and reserves it only within bf_window minutes
    # (default 1440), at bf_resolution s (default 60); the main pass, every sched_interval s (default 60) and on
    # events, tries default_queue_depth jobs (default 100) in priority order and stops at a partition whose job
    # did not fit.
    for name, default, unit_name in (("bf_interval", 30.0, "s"), ("bf_window", 1440.0, "min"),
                                ("bf_resolution", 60.0, "s"), ("bf_max_job_test", 500.0, ""),
                                ("sched_interval", 60.0, "s"), ("default_queue_depth", 100.0, "")):
        stated = _number(sched[name]) if name in sched else None
        if stated is not None:
            add("cluster", "", name, stated, f"SchedulerParameters {name}={sched[name]}")
        else:
            add("cluster", "", name, default, f"{name} not set (default {default:g}{unit_name and ' ' + unit_name})")
    add("cluster", "", "bf_continue", "bf_continue" in sched,
        "SchedulerParameters bf_continue" if "bf_continue" in sched else "bf_continue not set")
    scheduler_type = conf.get("SchedulerType", "")
    if scheduler_type:
        add("cluster", "", "scheduler_type", scheduler_type, f"SchedulerType={scheduler_type}")
    priority = conf.get("PriorityType", "")
    if priority:
        add("cluster", "", "priority_type", priority, f"PriorityType={priority}")
    age = conf.get("PriorityWeightAge", "")
    if age and _number(age) is not None:
        add("cluster", "", "priority_weight_age", _number(age), f"PriorityWeightAge={age}")
    for name, part in sorted(policy.partitions.items()):
        _add_stated(add, "partition", name, part, _PARTITION_STATED)
    for name, qos in sorted(policy.qos.items()):
        add("qos", name, "preempts", ",".join(qos.preempt), f"Preempt={','.join(qos.preempt)}")
        _add_stated(add, "qos", name, qos, _QOS_STATED)
    # The tier and preemptibility of each class that decides preemption (partitions, or QOS with preempt/qos).
    scope, classes = ("qos", policy.qos) if policy.ordering == "qos" else ("partition", policy.partitions)
    for name in sorted(classes):
        tier = policy.tier(name)
        add(scope, name, "tier", tier, "derived: " + ("cluster.tiers" if name in policy.tiers else scope))
        add(scope, name, "preemptible", policy.preemptible(name, tier), "derived")
    return rows


def _add_stated(add: Callable[[str, str, str, object, str], None], scope: str, name: str, stated: Partition | Qos,
                table: tuple[tuple[str, str, str], ...]) -> None:
    """The rows of the settings a class states (`table`: _PARTITION_STATED or _QOS_STATED)."""
    for attribute, setting, written in table:
        value = getattr(stated, attribute)
        if value is None or value == "":
            continue
        raw = written.split("=")[0] + "=UNLIMITED" if value == float("inf") else written.format(value)
        add(scope, name, setting, _mode(value) if setting == "preempt_mode" else value, raw)


def slurm_duration_s(text: str) -> float | None:
    """Seconds of a Slurm time ([days-]hh:mm:ss, mm:ss, minutes); None for NONE, INFINITE, UNLIMITED or blank."""
    text = text.strip()
    if not text or text.upper() in ("NONE", "INFINITE", "UNLIMITED", "N/A", "(NULL)"):
        return None
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        if not head.isdigit():
            return None
        days = int(head)
    parts = text.split(":")
    if not all(p.isdigit() for p in parts) or len(parts) > 3:
        return None
    numbers = [int(p) for p in parts]
    if len(parts) == 1:
        # A bare number is minutes, as slurm.conf reads it; with days, hours.
        seconds = numbers[0] * (3600 if days else 60)
    elif len(parts) == 2:
        seconds = numbers[0] * 3600 + numbers[1] * 60 if days else numbers[0] * 60 + numbers[1]
    else:
        seconds = numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
    return float(days * 86400 + seconds)


def slurm_limit_s(text: str) -> float | None:
    """A time limit's seconds: inf for UNLIMITED or INFINITE, None for NONE, blank or unreadable."""
    if text.strip().upper() in ("UNLIMITED", "INFINITE"):
        return float("inf")
    return slurm_duration_s(text)


def _words(text: str) -> dict[str, str]:
    """`a,b=3,c` as {a: "", b: "3", c: ""} (case kept; "(null)" is nothing)."""
    if text.strip().lower() in ("", "(null)"):
        return {}
    found = {}
    for word in text.split(","):
        key, _, value = word.strip().partition("=")
        if key:
            found[key.strip()] = value.strip()
    return found


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _flags(text: str) -> list[str]:
    return [w.strip().upper() for w in text.split(",") if w.strip()]


def _mode(text: str) -> str:
    words = _flags(text)
    main = [w for w in words if w not in _MODIFIERS]
    return main[0] if main else ("GANG" if "GANG" in words else "OFF")


def _config_values(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def config_values(text: str) -> dict[str, str]:
    """`scontrol show config` as key to value."""
    return _config_values(text)


def cluster_name_from_config(text: str) -> str:
    """ClusterName from `scontrol show config` output ("" when it gives none)."""
    return _config_values(text).get("ClusterName", "")


def preempt_type_from_config(text: str) -> tuple[str, str]:
    """(PreemptType, PreemptMode) from `scontrol show config` output."""
    values = _config_values(text)
    raw = values.get("PreemptType", "")
    kind = {"preempt/partition_prio": "partition_prio", "preempt/qos": "qos"}.get(raw, "none")
    return kind, values.get("PreemptMode", "OFF")


def partition_words(text: str) -> Iterator[dict[str, str]]:
    """`scontrol show partition -o`: one partition per line of KEY=VALUE words, each with its PartitionName."""
    for line in text.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if words.get("PartitionName"):
            yield words


def parse_partitions(text: str) -> dict[str, Partition]:
    found: dict[str, Partition] = {}
    for words in partition_words(text):
        name = words["PartitionName"]
        tier = words.get("PriorityTier", "")
        grace = words.get("GraceTime", "")
        found[name] = Partition(name, int(tier) if tier.isdigit() else None, words.get("PreemptMode") or None,
                                float(grace) if grace.isdigit() else None,
                                slurm_duration_s(words.get("DefaultTime", "")),
                                slurm_limit_s(words.get("MaxTime", "")))
    return found


QOS_FORMAT = "format=Name,Preempt,PreemptMode,PreemptExemptTime,GraceTime,Priority"


def parse_qos(text: str) -> dict[str, Qos]:
    """`sacctmgr -n -P show qos format=Name,Preempt,PreemptMode,PreemptExemptTime,GraceTime,Priority` (the
    first three fields are enough: older callers asked for no more)."""
    found: dict[str, Qos] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 3 or not parts[0]:
            continue
        preempt = tuple(p for p in parts[1].split(",") if p)
        mode = parts[2].strip()
        extra = [*parts[3:6], "", "", ""][:3]
        priority = extra[2].strip()
        found[parts[0]] = Qos(parts[0], preempt, None if mode in ("", "cluster") else mode,
                              slurm_duration_s(extra[0]), slurm_duration_s(extra[1]),
                              int(priority) if priority.isdigit() else None)
    return found
