"""Which tier a Slurm job belongs to and whether it may be preempted.

With `PreemptType=preempt/partition_prio` the partition's PriorityTier
decides, with `preempt/qos` the QOS `Preempt` lists (a QOS's Priority has
nothing to do with preemption). The facts come from `scontrol show
partition` and `sacctmgr show qos` where those answer; config overrides win:
`cluster.tiers` names the tier of a partition or QOS, `slurm.preemptible`
says whether it may be preempted.

Without an explicit tier, the highest PriorityTier (or a QOS that preempts
others and is preempted by none) is `high`, the lowest (a QOS others
preempt) is `low`, anything between `normal`; `critical` is only ever given
by config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

PREEMPT_TYPES = ("auto", "partition_prio", "qos", "none")
# PreemptMode words that only qualify the mode.
_MODIFIERS = ("GANG", "WITHIN", "PRIORITY")


@dataclass(frozen=True)
class Partition:
    name: str
    priority_tier: int | None
    preempt_mode: str | None


@dataclass(frozen=True)
class Qos:
    name: str
    preempt: tuple[str, ...]
    preempt_mode: str | None


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

    def priority_class(self, partition: str | None, qos: str | None) -> str | None:
        return qos if self.preempt_type == "qos" else partition

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
        return tier in self.preemptible_tiers

    def _derived_tier(self, priority_class: str) -> str | None:
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


def _mode(text: str) -> str:
    words = [w.strip().upper() for w in text.split(",") if w.strip()]
    main = [w for w in words if w not in _MODIFIERS]
    return main[0] if main else ("GANG" if "GANG" in words else "OFF")


def _config_values(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def cluster_name_from_config(text: str) -> str:
    """ClusterName from `scontrol show config` output ("" when it gives none)."""
    return _config_values(text).get("ClusterName", "")


def preempt_type_from_config(text: str) -> tuple[str, str]:
    """(PreemptType, PreemptMode) from `scontrol show config` output."""
    values = _config_values(text)
    raw = values.get("PreemptType", "")
    kind = {"preempt/partition_prio": "partition_prio", "preempt/qos": "qos"}.get(raw, "none")
    return kind, values.get("PreemptMode", "OFF")


def parse_partitions(text: str) -> dict[str, Partition]:
    """`scontrol show partition -o`: one partition per line, KEY=VALUE words."""
    found: dict[str, Partition] = {}
    for line in text.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        name = words.get("PartitionName")
        if not name:
            continue
        tier = words.get("PriorityTier", "")
        found[name] = Partition(name, int(tier) if tier.isdigit() else None, words.get("PreemptMode") or None)
    return found


QOS_FORMAT = "format=Name,Preempt,PreemptMode"


def parse_qos(text: str) -> dict[str, Qos]:
    """`sacctmgr -n -P show qos format=Name,Preempt,PreemptMode`."""
    found: dict[str, Qos] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 3 or not parts[0]:
            continue
        preempt = tuple(p for p in parts[1].split(",") if p)
        mode = parts[2].strip()
        found[parts[0]] = Qos(parts[0], preempt, None if mode in ("", "cluster") else mode)
    return found
