"""KAI PodGroups' jobs and runs, made of their pods.

KAI schedules and evicts a PodGroup's pods as a gang, but records nothing of
a run on the PodGroup itself: the pods are the run. A PodGroup's pods are the
pods whose annotation `pod-group-name` names it (KAI's podgrouper sets it on
every pod it groups); the PodGroup's job id is "<namespace>/<name>"
(objects.kai_member).

A run (an attempt) of a PodGroup is a set of its pods: the pods in the order
they were created, a new attempt beginning with a pod created once every pod
of the one before was told to stop (DisruptionTarget, or a delete: its
deletionTimestamp less its grace period) or has ended or is gone (deleted
while nobody watched: missing from a complete list). A gang eviction of N
pods so ends one run; the owner's replacement pods, created after the delete,
make the next. Within a run:

- GPUs: the sum over its pods; hosts: their nodes; submitted: its first
  pod's creation; started: its first pod's start;
- while a pod is not over: running (pending before any started);
- once all are over: preempted when one has DisruptionTarget/
  PreemptionByScheduler (KAI with --update-pod-eviction-condition), else
  failed, cancelled (deleted: how KAI evicts by default) or completed, in that
  order; ending at the last known end of its pods. A run whose pods are all
  gone unseen stays as last seen (running): a preemption link of its
  PodGroup closes it (docs/figures.md, section 1).

The pods are read one change at a time, so what is known of each PodGroup's
pods is kept between collections: JSON in the `pods` stream's cursor,
written with the rows it gave (Gangs.dump). Runs over for KEEP_S are folded
into a count, so the state holds the PodGroups' recent pods only.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from preemptlens.collectors.kubernetes.events import kai_preemptor
from preemptlens.collectors.kubernetes.objects import Member
from preemptlens.config import ClusterSettings

# How long a finished run's pods are kept to tell the next run from them; older runs are only counted.
KEEP_S = 7 * 86400.0
# The order a finished run's state is taken in, from its pods' states.
_OVER_STATES = ("preempted", "failed", "cancelled", "completed")


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass
class _Pod:
    alias: str
    created: datetime
    stop: datetime | None  # when it was told to stop, or ended
    start: datetime | None
    end: datetime | None
    state: str
    reason: str | None
    gpus: int
    host: str | None
    gone: bool = False

    @property
    def over(self) -> bool:
        return self.gone or self.stop is not None or self.state not in ("running", "pending")

    def as_json(self) -> dict[str, Any]:
        return {"a": self.alias, "c": _iso(self.created), "x": _iso(self.stop), "s": _iso(self.start),
                "e": _iso(self.end), "st": self.state, "r": self.reason, "g": self.gpus, "h": self.host,
                "gone": self.gone}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Pod:
        created = _time(data.get("c"))
        if created is None:
            raise ValueError("pod without a creation time")
        return cls(str(data.get("a") or ""), created, _time(data.get("x")), _time(data.get("s")),
                   _time(data.get("e")), str(data.get("st") or "pending"), data.get("r"), int(data.get("g") or 0),
                   data.get("h"), bool(data.get("gone")))


@dataclass
class _Group:
    first: datetime  # the earliest pod creation ever seen: the job's submission
    folded: int = 0  # runs before the pods kept
    priority_class: str | None = None
    priority_value: float | None = None
    queue: str | None = None
    pods: dict[str, _Pod] = field(default_factory=dict)

    def attempts(self) -> list[list[_Pod]]:
        runs: list[list[_Pod]] = []
        for pod in sorted(self.pods.values(), key=lambda p: (p.created, p.alias)):
            if not runs or _begins(runs[-1], pod):
                runs.append([pod])
            else:
                runs[-1].append(pod)
        return runs


def _begins(run: list[_Pod], pod: _Pod) -> bool:
    """Whether a pod begins a new run after `run`: created later than its pods, once they were all over, after
    each was told to stop. A pod gone unseen after pods gone unseen may as well have been evicted with them."""
    if pod.created <= max(p.created for p in run) or not all(p.over for p in run):
        return False
    if pod.gone and pod.stop is None and any(p.stop is None for p in run):
        return False
    return all(p.stop is None or p.stop <= pod.created for p in run)


def _run_row(group_id: str, number: int, pods: list[_Pod], pool: str | None) -> dict[str, Any]:
    starts = [p.start for p in pods if p.start is not None]
    hosts = sorted({p.host for p in pods if p.host})
    row: dict[str, Any] = {
        "job_id": group_id, "run": number, "pool": pool, "hosts": ",".join(hosts) or None,
        "gpus": sum(p.gpus for p in pods), "submit_time": min(p.created for p in pods),
        "eligible_time": min(p.created for p in pods), "start_time": min(starts) if starts else None,
        "end_time": None, "preemptor_job_id": None, "reason": None,
    }
    ended = [p for p in pods if not p.gone and p.state in _OVER_STATES]
    if all(p.over for p in pods) and ended:
        state = next(s for s in _OVER_STATES if any(p.state == s for p in ended))
        row["state"] = state
        row["end_time"] = max(p.end for p in ended if p.end is not None) if any(p.end for p in ended) else None
        row["reason"] = next((p.reason for p in ended if p.state == state and p.reason), None)
        if state == "preempted" and row["reason"]:
            # KAI's DisruptionTarget message is its eviction message, which names the preemptor
            row["preemptor_job_id"] = kai_preemptor(row["reason"])
        if row["end_time"] is None:
            row["state"] = "running" if starts else "pending"
    else:
        # a gang gone unseen stays as it was last seen: a preemption link of its PodGroup closes it
        row["state"] = "running" if starts else "pending"
    if row["end_time"] is not None and row["start_time"] is not None and row["end_time"] < row["start_time"]:
        row["end_time"] = row["start_time"]
    return row


class Gangs:
    """What is known of the pods of each KAI PodGroup, and the jobs, runs and aliases it makes."""

    def __init__(self, groups: dict[str, _Group] | None = None) -> None:
        self.groups: dict[str, _Group] = groups or {}
        self.changed: set[str] = set()

    @classmethod
    def load(cls, state: Any) -> Gangs:
        """From the JSON Gangs.dump wrote (an unreadable state starts afresh: it only numbers runs)."""
        groups: dict[str, _Group] = {}
        if isinstance(state, Mapping):
            for gid, data in state.items():
                try:
                    first = _time(data.get("first"))
                    if first is None:
                        continue
                    groups[str(gid)] = _Group(
                        first, int(data.get("folded") or 0), data.get("pc"), data.get("pv"), data.get("q"),
                        {str(uid): _Pod.from_json(pod) for uid, pod in (data.get("pods") or {}).items()},
                    )
                except (AttributeError, TypeError, ValueError):
                    continue
        return cls(groups)

    def dump(self) -> dict[str, Any]:
        return {
            gid: {"first": _iso(g.first), "folded": g.folded, "pc": g.priority_class, "pv": g.priority_value,
                  "q": g.queue, "pods": {uid: p.as_json() for uid, p in sorted(g.pods.items())}}
            for gid, g in sorted(self.groups.items())
        }

    def observe(self, member: Member) -> None:
        group = self.groups.get(member.group)
        if group is None:
            group = self.groups[member.group] = _Group(member.created)
        group.first = min(group.first, member.created)
        group.priority_class = member.priority_class
        group.priority_value = member.priority_value
        group.queue = member.queue or group.queue
        run = member.run
        group.pods[member.uid] = _Pod(member.alias, member.created, member.stop, run["start_time"], run["end_time"],
                                      run["state"], run["reason"], int(run["gpus"]), run["hosts"])
        self.changed.add(member.group)

    def listed(self, alive: Collection[str], namespaces: Collection[str] | None) -> None:
        """After a complete list: the pods it did not show were deleted unseen (in `namespaces`, None: all)."""
        for gid, group in self.groups.items():
            if namespaces is not None and gid.split("/", 1)[0] not in namespaces:
                continue
            for uid, pod in group.pods.items():
                if uid not in alive and not pod.gone:
                    pod.gone = True
                    self.changed.add(gid)

    def prune(self, now: datetime) -> None:
        """Fold runs that ended over KEEP_S ago into the count; the last run is always kept."""
        horizon = now - timedelta(seconds=KEEP_S)
        for group in self.groups.values():
            runs = group.attempts()
            old = 0
            for pods in runs[:-1]:
                ends = [p.end or p.stop or p.created for p in pods]
                if max(ends) >= horizon:
                    break
                old += 1
            for pods in runs[:old]:
                for pod in pods:
                    group.pods.pop(next(uid for uid, p in group.pods.items() if p is pod))
            group.folded += old

    def rows(self, tiering: ClusterSettings) -> Iterator[tuple[str, dict[str, list[dict[str, Any]]]]]:
        """(group, rows by table) for every PodGroup observed since the last call."""
        for gid in sorted(self.changed):
            group = self.groups[gid]
            namespace, _, name = gid.partition("/")
            runs = [_run_row(gid, group.folded + i + 1, pods, group.queue)
                    for i, pods in enumerate(group.attempts())]
            tier = tiering.tier_of(group.priority_class, group.queue)
            job = {
                "job_id": gid, "name": name, "team": namespace, "user_name": None,
                "priority_class": group.priority_class, "priority_value": group.priority_value, "tier": tier,
                "preemptible": tier in tiering.preemptible_tiers, "pool": group.queue,
                "gpus": runs[-1]["gpus"] if runs else 0, "submit_time": group.first,
            }
            aliases = [{"alias": pod.alias, "job_id": gid} for pod in group.pods.values() if pod.alias]
            yield gid, {"jobs": [job], "job_runs": runs, "job_aliases": aliases}
        self.changed.clear()


def dump_cursor(resource_version: str | None, gangs: Gangs) -> str | None:
    """The `pods` stream's cursor: its resourceVersion and the PodGroups' pods."""
    if resource_version is None:
        return None
    return json.dumps({"rv": resource_version, "kai": gangs.dump()}, sort_keys=True, separators=(",", ":"))


def load_cursor(text: str | None) -> tuple[str | None, Gangs]:
    """A `pods` cursor as dump_cursor wrote it, or a bare resourceVersion (written before gangs were kept)."""
    if not text:
        return None, Gangs()
    try:
        data = json.loads(text)
    except ValueError:
        return text, Gangs()
    if isinstance(data, Mapping) and isinstance(data.get("rv"), str):
        return data["rv"], Gangs.load(data.get("kai"))
    return text, Gangs()
