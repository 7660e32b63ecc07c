"""Preemption events of kube-scheduler, Kueue, KAI-Scheduler and Volcano.

Turns one Event object, from core/v1 or events.k8s.io/v1 (two views of the
same objects, with different field names), into the preemptions it reports.
Pure functions over the API's JSON; no client, no I/O.

Which events count, one link per preemption (the victim side only, so that a
preemption reported by two events is not counted twice):

- kube-scheduler `Preempted` on a Pod: victim = the pod's UID. The preemptor
  is the event's related object UID when it has one, else what the message
  names: `Preempted by <ns>/<name> on node <n>` (kept as "<ns>/<name>"),
  `Preempted by pod <UID> on node <n>` (the UID), `Preempted by a pod on node
  <n>` (unknown: NULL, and the reason says so).
- Kueue `Preempted` on a Workload: victim = the Workload's UID, preemptor =
  the preemptor Workload's UID from the message, reason = the Kueue condition
  reason (InClusterQueue, InCohortReclamation, InCohortFairSharing,
  InCohortReclaimWhileBorrowing). `EvictedDueToPreempted` (same message, same
  victim) and `PreemptedWorkload` (on the preemptor) repeat it and are parsed
  but give no second link.
- KAI `Evict` on a PodGroup: victim = the PodGroup's UID, preemptor = the
  evictor PodGroup named by the event's annotations ("<ns>/<name>"), reason =
  the evictor action (preempt, reclaim, consolidation, stalegangeviction).
- Volcano `Evict` on a Pod ("Pod is evicted, because of preempt"): victim =
  the pod's UID; Volcano never records the preemptor. Volcano's PodGroup
  `Evict` repeats its pods' events and gives no link.

An event that repeats (core/v1 `count` > 1, events.k8s.io `series`) gives a
second link at its last time: kept with the same preemptor when the message
is repeated word for word (core/v1 counting), without one for an
events.k8s.io series, whose note is only the first occurrence's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

KUEUE_REASONS: tuple[tuple[str, str], ...] = (
    # Longest first: "reclamation within the cohort" is a prefix of the last one.
    ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
    ("reclamation within the cohort", "InCohortReclamation"),
    ("Fair Sharing within the cohort", "InCohortFairSharing"),
    ("prioritization in the ClusterQueue", "InClusterQueue"),
)

_SCHED_BY_NAME = re.compile(r"^Preempted by (?P<ns>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)/(?P<name>\S+) on node (?P<node>\S+)")
_SCHED_BY_UID = re.compile(r"^Preempted by pod (?P<uid>[0-9a-fA-F-]{8,}) on node (?P<node>\S+)")
_SCHED_ANONYMOUS = re.compile(r"^Preempted by a pod on node (?P<node>\S+)")
_KUEUE_PREEMPTED = re.compile(
    r"^Preempted to accommodate a workload \(UID: (?P<uid>[^,)\s]+)(?:, JobUID: (?P<job_uid>[^,)\s]*))?\)"
    r"(?: due to (?P<why>[^;]+))?"
)
_KUEUE_PREEMPTED_WORKLOAD = re.compile(
    r"^Preempted workload (?P<ns>[^/\s]+)/(?P<name>\S+) \(UID: (?P<uid>[^)\s]+)\)(?: in ClusterQueue (?P<cq>[^;\s]+))?"
)
_KUEUE_WAIT = re.compile(r"wait time since queued was (?P<s>\d+(?:\.\d+)?)s")
_VOLCANO_EVICT = re.compile(r"^Pod is evicted, because of (?P<action>\w+)")

KAI_API_GROUP = "scheduling.run.ai"
VOLCANO_API_GROUP = "scheduling.volcano.sh"


class ParseError(ValueError):
    """A record the collector cannot read: `field` names what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field
        self.reason = reason


def parse_time(value: Any, field: str) -> datetime:
    """RFC 3339 as the API writes it (Time: seconds, MicroTime: microseconds)."""
    if not isinstance(value, str) or not value:
        raise ParseError(field, f"must be an RFC 3339 time (got {value!r})")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ParseError(field, f"must be an RFC 3339 time (got {value!r})") from None
    if parsed.tzinfo is None:
        raise ParseError(field, f"must carry a UTC offset (got {value!r})")
    return parsed.astimezone(UTC)


def optional_time(obj: Mapping[str, Any], key: str, field: str) -> datetime | None:
    value = obj.get(key)
    return None if value in (None, "") else parse_time(value, field)


def mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError(field, f"must be an object (got {type(value).__name__})")
    return value


def text(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParseError(field, f"must be a string (got {type(value).__name__})")
    return value


def required_text(value: Any, field: str) -> str:
    found = text(value, field)
    if not found:
        raise ParseError(field, "is required")
    return found


def locate(obj: Any, stream: str) -> str:
    """A record locator for quarantine: stream and namespace/name, or the object's own text."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
        ns = meta.get("namespace")
        found = f"{stream} {ns}/{meta['name']}" if isinstance(ns, str) and ns else f"{stream} {meta['name']}"
        # JSON may carry half a surrogate pair (\ud800), which no text column stores: escaped, it still names it
        return found.encode("utf-8", "backslashreplace").decode("utf-8")
    shown = json.dumps(obj, default=str)
    return f"{stream} {shown[:120]}"


@dataclass(frozen=True)
class ObjectRef:
    kind: str | None
    namespace: str | None
    name: str | None
    uid: str | None
    api_version: str | None


@dataclass(frozen=True)
class Event:
    """An Event in the shape both APIs share."""

    reason: str
    message: str
    regarding: ObjectRef
    related: ObjectRef | None
    annotations: Mapping[str, Any]
    first_time: datetime
    last_time: datetime | None
    repeated_verbatim: bool


@dataclass(frozen=True)
class Preemption:
    victim_job_id: str
    time: datetime
    preemptor_job_id: str | None
    reason: str


@dataclass(frozen=True)
class KueuePreemption:
    preemptor_uid: str
    preemptor_job_uid: str | None
    reason: str | None  # the condition reason, e.g. InClusterQueue; None when the text is unknown


def _ref(value: Any, field: str) -> ObjectRef:
    ref = mapping(value, field)
    return ObjectRef(
        kind=text(ref.get("kind"), f"{field}.kind"),
        namespace=text(ref.get("namespace"), f"{field}.namespace"),
        name=text(ref.get("name"), f"{field}.name"),
        uid=text(ref.get("uid"), f"{field}.uid"),
        api_version=text(ref.get("apiVersion"), f"{field}.apiVersion"),
    )


def normalize(raw: Any, api: str) -> Event:
    """Read an Event of `api` ("v1" or "events.k8s.io/v1") into the common shape."""
    if not isinstance(raw, Mapping):
        raise ParseError("object", f"must be an Event object (got {type(raw).__name__})")
    meta = mapping(raw.get("metadata"), "metadata")
    annotations = mapping(meta.get("annotations"), "metadata.annotations")
    series = mapping(raw.get("series"), "series")
    if api == "v1":
        regarding_key, related_key, message_key = "involvedObject", "related", "message"
        first_keys = ("eventTime", "firstTimestamp")
        last_time = optional_time(raw, "lastTimestamp", "lastTimestamp")
        count = raw.get("count")
        repeated_verbatim = isinstance(count, int) and count > 1 and not series
    else:
        regarding_key, related_key, message_key = "regarding", "related", "note"
        first_keys = ("eventTime", "deprecatedFirstTimestamp")
        last_time = optional_time(raw, "deprecatedLastTimestamp", "deprecatedLastTimestamp")
        repeated_verbatim = False
    if series:
        last_time = optional_time(series, "lastObservedTime", "series.lastObservedTime") or last_time
    first_time = None
    for key in first_keys:
        first_time = optional_time(raw, key, key)
        if first_time is not None:
            break
    if first_time is None:
        first_time = parse_time(meta.get("creationTimestamp"), f"{first_keys[0]}")
    related = raw.get(related_key)
    return Event(
        reason=text(raw.get("reason"), "reason") or "",
        message=text(raw.get(message_key), message_key) or "",
        regarding=_ref(raw.get(regarding_key), regarding_key),
        related=_ref(related, related_key) if related is not None else None,
        annotations=annotations,
        first_time=first_time,
        last_time=last_time if last_time is not None and last_time != first_time else None,
        repeated_verbatim=repeated_verbatim,
    )


def relevant(raw: Any) -> bool:
    """Whether an Event may report a preemption; the rest are skipped unread."""
    return isinstance(raw, Mapping) and raw.get("reason") in ("Preempted", "Evict")


def parse_kueue_preempted(message: str) -> KueuePreemption | None:
    match = _KUEUE_PREEMPTED.match(message)
    if not match:
        return None
    why = (match.group("why") or "").strip()
    reason = next((code for phrase, code in KUEUE_REASONS if why.startswith(phrase)), None)
    return KueuePreemption(match.group("uid"), match.group("job_uid") or None, reason)


def parse_kueue_preempted_workload(message: str) -> tuple[str, str, str | None] | None:
    """`PreemptedWorkload` on the preemptor: (victim ns/name, victim UID, its ClusterQueue)."""
    match = _KUEUE_PREEMPTED_WORKLOAD.match(message)
    if not match:
        return None
    return f"{match.group('ns')}/{match.group('name')}", match.group("uid"), match.group("cq")


def parse_kueue_wait(message: str) -> float | None:
    """Seconds a workload waited since it was (re)queued, from a `QuotaReserved` message."""
    match = _KUEUE_WAIT.search(message)
    return float(match.group("s")) if match else None


def parse_scheduler_message(message: str) -> tuple[str | None, str]:
    """kube-scheduler `Preempted`: (preemptor as the message gives it, node)."""
    for pattern in (_SCHED_BY_UID, _SCHED_BY_NAME, _SCHED_ANONYMOUS):
        match = pattern.match(message)
        if match:
            groups = match.groupdict()
            if "uid" in groups:
                return groups["uid"], groups["node"]
            if "ns" in groups:
                return f"{groups['ns']}/{groups['name']}", groups["node"]
            return None, groups["node"]
    raise ParseError("message", f"is not a kube-scheduler preemption message (got {message[:80]!r})")


def _group(api_version: str | None) -> str:
    return (api_version or "").split("/")[0] if "/" in (api_version or "") else ""


def _victim(event: Event, field: str) -> str:
    if not event.regarding.uid:
        raise ParseError(f"{field}.uid", "is required to name the victim")
    return event.regarding.uid


def preemptions(raw: Any, api: str) -> list[Preemption]:
    """The preemptions one Event reports (often none). Raises ParseError."""
    if not relevant(raw):
        return []
    event = normalize(raw, api)
    regarding_field = "involvedObject" if api == "v1" else "regarding"
    kind = event.regarding.kind
    group = _group(event.regarding.api_version)
    found: Preemption | None = None
    if event.reason == "Preempted" and kind == "Pod":
        victim = _victim(event, regarding_field)
        named, node = parse_scheduler_message(event.message)
        preemptor = event.related.uid if event.related is not None and event.related.uid else named
        why = f"kube-scheduler preempted on node {node}"
        found = Preemption(victim, event.first_time, preemptor, why if preemptor else why + "; preemptor not recorded")
    elif event.reason == "Preempted" and kind == "Workload":
        victim = _victim(event, regarding_field)
        parsed = parse_kueue_preempted(event.message)
        if parsed is None:
            raise ParseError("message" if api == "v1" else "note", "is not a Kueue preemption message")
        code = parsed.reason or "unknown reason"
        found = Preemption(victim, event.first_time, parsed.preemptor_uid, f"kueue {code}")
    elif event.reason == "Evict" and kind == "PodGroup" and group == KAI_API_GROUP:
        victim = _victim(event, regarding_field)
        notes = event.annotations
        action = text(notes.get("evictor-action-type"), "metadata.annotations.evictor-action-type")
        ns = text(notes.get("evictor-pod-group-namespace"), "metadata.annotations.evictor-pod-group-namespace")
        name = text(notes.get("evictor-pod-group-name"), "metadata.annotations.evictor-pod-group-name")
        preemptor = f"{ns}/{name}" if ns and name else None
        why = f"kai {action or 'evict'}"
        found = Preemption(victim, event.first_time, preemptor, why if preemptor else why + "; preemptor not recorded")
    elif event.reason == "Evict" and kind == "Pod":
        match = _VOLCANO_EVICT.match(event.message)
        if match is None:
            return []
        victim = _victim(event, regarding_field)
        found = Preemption(victim, event.first_time, None, f"volcano {match.group('action')}; preemptor not recorded")
    if found is None:
        return []
    links = [found]
    if event.last_time is not None:
        again = found.preemptor_job_id if event.repeated_verbatim else None
        note = found.reason if again or "preemptor not recorded" in found.reason else (
            found.reason + "; repeat in an event series, preemptor not recorded"
        )
        links.append(Preemption(found.victim_job_id, event.last_time, again, note))
    return links
