"""Preemption events of kube-scheduler, Kueue, KAI-Scheduler and Volcano.

Turns one Event object, from core/v1 or events.k8s.io/v1 (two views of the
same objects, with different field names), into the preemptions it reports.
Pure functions over the API's JSON; no client, no I/O. docs/kubernetes.md has
the table of what each version writes and what is read of it.

Which events count, one link per preemption (the victim side only, so that a
preemption reported by two events is not counted twice):

- kube-scheduler `Preempted` on a Pod: victim = the pod's UID. The preemptor
  is the event's related object UID when it has one, else what the message
  names: `Preempted by <ns>/<name> on node <n>` (kept as "<ns>/<name>"),
  `Preempted by pod <UID> on node <n>` (the UID), `Preempted by a pod on node
  <n>` (unknown: NULL, and the reason says so).
- Kueue `Preempted` on a Workload: victim = the Workload's UID, preemptor =
  the preemptor Workload's UID where the message names one (from 0.7), reason
  = the Kueue condition reason (InClusterQueue, InCohort up to 0.7,
  InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing).
  `EvictedDueToPreempted` (same message, same victim) and `PreemptedWorkload`
  (on the preemptor) repeat it and give no second link.
- KAI `Evict` on a PodGroup: victim = the PodGroup, "<namespace>/<name>" (the
  job id of a KAI PodGroup, objects), preemptor = the evictor PodGroup named
  by the event's annotations (else by the message), reason = the evictor
  action (preempt, reclaim, consolidation). KAI writes one event per evicted
  pod of a gang: the collector keeps one link per gang eviction. A stale
  gang's eviction (`stalegangeviction`: fewer pods left than the gang needs)
  is no preemption.
- Volcano `Evict` on a Pod ("Pod is evicted, because of preempt", "reclaim"
  or "shuffle", a rebalancing eviction, counted like KAI's consolidation):
  victim = the pod's UID; Volcano never records the preemptor. Volcano's
  PodGroup `Evict` repeats its pods' events and gives no link.

A message that no known version writes costs the preemptor's name (NULL, the
reason says the message was not recognised), never the preemption.

Who wrote an Event: any tenant allowed to create Events in a namespace can
write one that looks like a scheduler's. A preemption is believed only from
the component that reports that kind of preemption (`kubernetes.reporters`,
by default kube-scheduler's `default-scheduler`, Kueue's `kueue-admission`,
KAI's `kai-scheduler`, Volcano's `volcano`): the writer is the event's
reportingController (events.k8s.io) / reportingComponent (core/v1) and its
source component, which must agree. Any other writer raises Untrusted, and
the collector quarantines the event with the reason. Each link records its
writer (`preemption_links.reporter`).

An event that repeats (core/v1 `count` > 1, events.k8s.io `series`) gives a
second link at its last time: kept with the same preemptor when the message
is repeated word for word (core/v1 counting), without one for an
events.k8s.io series, whose note is only the first occurrence's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from preemptlens.contract import RecordError

KUEUE_REASONS: tuple[tuple[str, str], ...] = (
    # Longest first: "reclamation within the cohort" is a prefix of the one after it.
    ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
    ("reclamation within the cohort", "InCohortReclamation"),
    ("Fair Sharing within the cohort", "InCohortFairSharing"),
    ("prioritization in the ClusterQueue", "InClusterQueue"),
)
# Kueue up to 0.7 named where the preemptor was, not why: "... in the ClusterQueue" / "... in the cohort".
KUEUE_ORIGINS = {"ClusterQueue": "InClusterQueue", "cohort": "InCohort"}

# The kinds of preemption an Event reports, and the components that write each by default.
KUBE_SCHEDULER, KUEUE, KAI, VOLCANO = "kube-scheduler", "kueue", "kai", "volcano"
DEFAULT_REPORTERS: dict[str, list[str]] = {
    KUBE_SCHEDULER: ["default-scheduler"],
    KUEUE: ["kueue-admission"],
    KAI: ["kai-scheduler"],
    VOLCANO: ["volcano"],
}

# client-go's event correlator folds more than ten similar events of one object into one with this prefix.
_COMBINED = "(combined from similar events): "
# Kueue's conditions keep a past eviction's message behind this after a re-admission.
PREVIOUSLY = "Previously: "

_SCHED_BY_NAME = re.compile(
    r"^Preempted by (?P<ns>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)/(?P<name>[^\s/]+) on node (?P<node>\S+)")
_SCHED_BY_UID = re.compile(r"^Preempted by pod (?P<uid>[0-9a-fA-F-]{8,}) on node (?P<node>\S+)")
_SCHED_ANY = re.compile(r"^Preempted by .*? on node (?P<node>[^\s.]+(?:\.[^\s.]+)*)")
_KUEUE_PREEMPTED = re.compile(
    r"^Preempted to accommodate a (?:higher priority )?workload"
    r"(?: \(UID: (?P<uid>[^,)\s]*)(?:, JobUID: (?P<job_uid>[^,)\s]*))?\))?"
    r"(?: due to (?P<why>[^;]+)| in the (?P<origin>ClusterQueue|cohort))?",
    re.IGNORECASE,
)
# Kueue 0.15 on: where in the cohort tree each side's ClusterQueue is ("/<cohort>/.../<cq>", or UNKNOWN);
# 0.17 on, in the event only: each side's effective priority, with its base and boost.
_KUEUE_PATHS = re.compile(r"; preemptor path: (?P<preemptor>[^;\s]+); preemptee path: (?P<preemptee>[^;\s]+)")
_KUEUE_PRIORITIES = re.compile(
    r"; preemptor effective priority: (?P<preemptor>-?\d{1,19}) \(base: -?\d{1,19}, boost: -?\d{1,19}\); "
    r"preemptee effective priority: (?P<preemptee>-?\d{1,19}) ")
_KUEUE_ANONYMOUS = re.compile(r"^Preempted by another workload in the (?P<origin>ClusterQueue|cohort)")
_KUEUE_RULE = re.compile(r"^Preempted by rule '(?P<rule>[^']*)' in PreemptionConfig '(?P<config>[^']*)'")
_KUEUE_RULE_BY = re.compile(r" to accommodate workload (?P<ns>[^/\s]+)/(?P<name>[^\s;]+)")
_KUEUE_PREEMPTED_WORKLOAD = re.compile(
    r"^Preempted workload (?P<ns>[^/\s]+)/(?P<name>\S+) \(UID: (?P<uid>[^)\s]+)\)(?: in ClusterQueue (?P<cq>[^;\s]+))?"
)
_KUEUE_WAIT = re.compile(r"wait time since queued was (?P<s>\d+(?:\.\d+)?)s")
_VOLCANO_EVICT = re.compile(r"^Pod is evicted, because of (?P<action>\w+)")
_KAI_BY = re.compile(r"Pod \S+ was preempted by (?:higher priority )?workload (?P<ns>[^/\s]+)/(?P<name>[^\s.]+)")
_KAI_CONSOLIDATION = re.compile(r"^Pod \S+ was preempted and rescheduled due to bin packing")
# KAI's evictor annotations on an `Evict` event.
KAI_ACTION = "evictor-action-type"
KAI_EVICTOR_NAME, KAI_EVICTOR_NAMESPACE = "evictor-pod-group-name", "evictor-pod-group-namespace"
KAI_GANG_SIZE = "num-evicted-pods"
KAI_NOT_PREEMPTION = frozenset({"stalegangeviction"})

KAI_API_GROUP = "scheduling.run.ai"
VOLCANO_API_GROUP = "scheduling.volcano.sh"
KUEUE_API_GROUP = "kueue.x-k8s.io"
UNRECOGNISED = "message not recognised"


class ParseError(RecordError):
    """A Kubernetes object the collector cannot read."""


class Untrusted(ParseError):
    """An event shaped like a scheduler's preemption report that a component not trusted with it wrote."""


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


def check_reporters(value: Any) -> str | None:
    """The `kubernetes.reporters` table: each known kind of preemption to a list of component names."""
    if not isinstance(value, Mapping):
        return "expected a table of kind = [component names]"
    unknown = sorted(str(k) for k in value if k not in DEFAULT_REPORTERS)
    if unknown:
        return f"unknown kinds {unknown}: the kinds are {', '.join(DEFAULT_REPORTERS)}"
    for kind, names in value.items():
        if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
            return f"{kind}: expected a list of component names"
    return None


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
    writers: tuple[tuple[str, str], ...]  # (field, component) for every field naming the writer


@dataclass(frozen=True)
class Preemption:
    victim_job_id: str
    time: datetime
    preemptor_job_id: str | None
    reason: str
    reporter: str
    kind: str  # KUBE_SCHEDULER, KUEUE, KAI or VOLCANO
    victim: ObjectRef | None = None  # the object the event names as its victim (corroborate)
    # Kueue 0.15 on: the preemptor's ClusterQueue and cohort path, known even when the preemptor is gone
    # (kubernetes-sigs/kueue#11079); 0.17 on: both sides' effective priorities
    preemptor_queue: str | None = None
    preemptor_cohort: str | None = None
    preemptor_priority: int | None = None
    victim_priority: int | None = None


@dataclass(frozen=True)
class KueuePreemption:
    preemptor_uid: str | None  # None when the message names none (before Kueue 0.7, or "UNKNOWN")
    preemptor_job_uid: str | None
    reason: str | None  # the condition reason, e.g. InClusterQueue; None when the text is unknown
    preemptor_path: str | None = None  # "/<cohort>/.../<ClusterQueue>" (0.15 on); None when not said
    preemptee_path: str | None = None
    preemptor_priority: int | None = None  # effective (base + boost), the event's only (0.17 on)
    preemptee_priority: int | None = None


@dataclass(frozen=True)
class QueueSide:
    """Where a Kueue preemptor was, from its path: its ClusterQueue and the cohort path above it."""

    queue: str | None
    cohort: str | None  # "/<root>/.../<parent>"; None for a ClusterQueue in no cohort


def queue_side(path: str | None) -> QueueSide:
    if not path or not path.startswith("/") or path.endswith("/"):
        return QueueSide(None, None)
    cohort, queue = path.rsplit("/", 1)
    return QueueSide(queue, cohort or None)


def _kueue_details(message: str) -> dict[str, Any]:
    """The paths and effective priorities a Kueue preemption message adds (0.15, 0.17 on)."""
    found: dict[str, Any] = {}
    paths = _KUEUE_PATHS.search(message)
    if paths:
        found["preemptor_path"] = None if paths.group("preemptor") == "UNKNOWN" else paths.group("preemptor")
        found["preemptee_path"] = None if paths.group("preemptee") == "UNKNOWN" else paths.group("preemptee")
    priorities = _KUEUE_PRIORITIES.search(message + " ")
    if priorities:
        # Kueue's priorities are int64; a number beyond is no priority it wrote
        for side in ("preemptor", "preemptee"):
            value = int(priorities.group(side))
            found[f"{side}_priority"] = value if -(2**63) <= value < 2**63 else None
    return found


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
        writer_fields = (("reportingComponent", raw.get("reportingComponent")),
                         ("source.component", mapping(raw.get("source"), "source").get("component")))
    else:
        regarding_key, related_key, message_key = "regarding", "related", "note"
        first_keys = ("eventTime", "deprecatedFirstTimestamp")
        last_time = optional_time(raw, "deprecatedLastTimestamp", "deprecatedLastTimestamp")
        repeated_verbatim = False
        writer_fields = (("reportingController", raw.get("reportingController")),
                         ("deprecatedSource.component",
                          mapping(raw.get("deprecatedSource"), "deprecatedSource").get("component")))
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
    message = text(raw.get(message_key), message_key) or ""
    return Event(
        reason=text(raw.get("reason"), "reason") or "",
        message=message.removeprefix(_COMBINED),
        regarding=_ref(raw.get(regarding_key), regarding_key),
        related=_ref(related, related_key) if related is not None else None,
        annotations=annotations,
        first_time=first_time,
        last_time=last_time if last_time is not None and last_time != first_time else None,
        repeated_verbatim=repeated_verbatim,
        writers=tuple((f, w.strip()) for f, w in ((f, text(v, f)) for f, v in writer_fields) if w and w.strip()),
    )


def relevant(raw: Any) -> bool:
    """Whether an Event may report a preemption; the rest are skipped unread."""
    return isinstance(raw, Mapping) and raw.get("reason") in ("Preempted", "Evict")


def _earlier(message: str) -> str:
    """A Kueue condition message without its "Previously: " prefixes (releases before 0.14 stack one per
    re-admission, kubernetes-sigs/kueue#6819)."""
    while message.startswith(PREVIOUSLY):
        message = message[len(PREVIOUSLY):]
    return message


def _kueue_code(why: str) -> str | None:
    return next((code for phrase, code in KUEUE_REASONS if why.strip().startswith(phrase)), None)


def parse_kueue_preempted(message: str) -> KueuePreemption | None:
    """A Kueue preemption message of any release (event or condition, with or without "Previously: "),
    or None when it is not one."""
    message = _earlier(message)
    match = _KUEUE_PREEMPTED.match(message)
    if match:
        uid = match.group("uid") or None
        job_uid = match.group("job_uid") or None
        why, origin = match.group("why"), match.group("origin")
        reason = _kueue_code(why) if why else KUEUE_ORIGINS.get(origin or "")
        return KueuePreemption(None if uid == "UNKNOWN" else uid, None if job_uid == "UNKNOWN" else job_uid, reason,
                               **_kueue_details(message))
    match = _KUEUE_ANONYMOUS.match(message)
    if match:
        return KueuePreemption(None, None, KUEUE_ORIGINS[match.group("origin")])
    return None


def kueue_reason_text(message: str) -> str | None:
    """A reason for a Kueue preemption message no release before 0.20 writes, where it says one: the
    preemption rule of a PreemptionConfig (Kueue 0.20, configurable preemption)."""
    match = _KUEUE_RULE.match(_earlier(message))
    return f"rule {match.group('rule')!r} in PreemptionConfig {match.group('config')!r}" if match else None


def kueue_rule_preemptor(message: str) -> str | None:
    """The preemptor a Kueue 0.20 rule message names, "<namespace>/<name>" of its Workload."""
    match = _KUEUE_RULE_BY.search(_earlier(message))
    return f"{match.group('ns')}/{match.group('name')}" if match else None


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


def parse_scheduler_message(message: str) -> tuple[str | None, str | None]:
    """kube-scheduler `Preempted`: (preemptor as the message gives it, node); (None, None) for a text
    no release writes, which still reports the preemption."""
    for pattern in (_SCHED_BY_UID, _SCHED_BY_NAME):
        match = pattern.match(message)
        if match:
            groups = match.groupdict()
            preemptor = groups["uid"] if "uid" in groups else f"{groups['ns']}/{groups['name']}"
            return preemptor, groups["node"]
    match = _SCHED_ANY.match(message)
    return None, match.group("node") if match else None


def kai_victim(namespace: str | None, name: str | None) -> str | None:
    """The job id of a KAI PodGroup: "<namespace>/<name>", as KAI's evictor annotations name a preemptor
    and as its podgrouper names a pod's PodGroup."""
    return f"{namespace}/{name}" if namespace and name else None


def kai_preemptor(message: str) -> str | None:
    """The preemptor PodGroup a KAI eviction message names (preempt, reclaim), "<namespace>/<name>"."""
    by = _KAI_BY.search(message)
    return f"{by.group('ns')}/{by.group('name')}" if by else None


def _group(api_version: str | None) -> str:
    return (api_version or "").split("/")[0] if "/" in (api_version or "") else ""


def _victim(event: Event, field: str) -> str:
    if not event.regarding.uid:
        raise ParseError(f"{field}.uid", "is required to name the victim")
    return event.regarding.uid


def _kind(event: Event) -> str | None:
    """Which scheduler's kind of preemption report the event is shaped as, if any."""
    kind, group = event.regarding.kind, _group(event.regarding.api_version)
    if event.reason == "Preempted" and kind == "Pod":
        return KUBE_SCHEDULER
    if event.reason == "Preempted" and kind == "Workload" and group in ("", KUEUE_API_GROUP):
        return KUEUE
    if event.reason == "Evict" and kind == "PodGroup" and group == KAI_API_GROUP:
        return KAI
    if event.reason == "Evict" and kind == "Pod":
        return VOLCANO
    return None


def writer(event: Event, kind: str, api: str, trusted: Collection[str]) -> str:
    """The component that wrote the event, when it is one trusted to report this kind; else Untrusted."""
    field = "reportingComponent" if api == "v1" else "reportingController"
    names = sorted({name for _, name in event.writers})
    allowed = ", ".join(sorted(trusted)) or "nobody"
    if not names:
        raise Untrusted(field, f"names no writer: a {kind} preemption is believed only from {allowed} "
                               "(kubernetes.reporters)")
    if len(names) > 1:
        raise Untrusted(field, f"names two writers ({', '.join(repr(n) for n in names)}): a {kind} preemption is "
                               f"believed only from {allowed} (kubernetes.reporters)")
    if names[0] not in trusted:
        raise Untrusted(field, f"written by {names[0]!r}, not by a component trusted to report {kind} preemptions "
                               f"({allowed}; kubernetes.reporters)")
    return names[0]


def _kai(event: Event, field: str) -> tuple[str, str | None, str] | None:
    """(victim, preemptor, action) of a KAI Evict; None for a stale gang's eviction."""
    victim = kai_victim(event.regarding.namespace, event.regarding.name)
    if victim is None:
        raise ParseError(f"{field}.name", "and namespace are required to name the victim PodGroup")
    notes = event.annotations
    action = text(notes.get(KAI_ACTION), f"metadata.annotations.{KAI_ACTION}")
    preemptor = kai_victim(
        text(notes.get(KAI_EVICTOR_NAMESPACE), f"metadata.annotations.{KAI_EVICTOR_NAMESPACE}"),
        text(notes.get(KAI_EVICTOR_NAME), f"metadata.annotations.{KAI_EVICTOR_NAME}"),
    )
    by = _KAI_BY.match(event.message)  # at the start: the message is the eviction's own
    if preemptor is None and by:
        preemptor = f"{by.group('ns')}/{by.group('name')}"
    if action is None:
        if _KAI_CONSOLIDATION.match(event.message):
            action = "consolidation"
        elif by:
            action = "preempt" if "higher priority" in event.message.split("\n", 1)[0] else "reclaim"
    if action in KAI_NOT_PREEMPTION:
        return None
    return victim, preemptor, action or "evict"


def preemptions(
    raw: Any, api: str, reporters: Mapping[str, Collection[str]] | None = None
) -> list[Preemption]:
    """The preemptions one Event reports (often none). Raises ParseError, Untrusted for a writer that
    `reporters` (kind -> component names; DEFAULT_REPORTERS when None) does not trust with its kind."""
    if not relevant(raw):
        return []
    event = normalize(raw, api)
    kind = _kind(event)
    if kind is None:
        return []
    regarding_field = "involvedObject" if api == "v1" else "regarding"
    trusted = (reporters if reporters is not None else DEFAULT_REPORTERS).get(kind, ())
    reporter = writer(event, kind, api, trusted)
    if kind == KUBE_SCHEDULER:
        victim = _victim(event, regarding_field)
        named, node = parse_scheduler_message(event.message)
        preemptor = event.related.uid if event.related is not None and event.related.uid else named
        why = f"kube-scheduler preempted on node {node}" if node else f"kube-scheduler preempted; {UNRECOGNISED}"
        found = Preemption(victim, event.first_time, preemptor,
                           why if preemptor else why + "; preemptor not recorded", reporter, kind)
    elif kind == KUEUE:
        victim = _victim(event, regarding_field)
        parsed = parse_kueue_preempted(event.message)
        if parsed is not None:
            why = f"kueue {parsed.reason or 'unknown reason'}"
        else:
            why = f"kueue {kueue_reason_text(event.message) or UNRECOGNISED}"
        preemptor = parsed.preemptor_uid if parsed else kueue_rule_preemptor(event.message)
        side = queue_side(parsed.preemptor_path if parsed else None)
        found = Preemption(victim, event.first_time, preemptor,
                           why if preemptor else why + "; preemptor not recorded", reporter, kind,
                           preemptor_queue=side.queue, preemptor_cohort=side.cohort,
                           preemptor_priority=parsed.preemptor_priority if parsed else None,
                           victim_priority=parsed.preemptee_priority if parsed else None)
    elif kind == KAI:
        read = _kai(event, regarding_field)
        if read is None:
            return []
        victim, preemptor, action = read
        why = f"kai {action}"
        found = Preemption(victim, event.first_time, preemptor,
                           why if preemptor else why + "; preemptor not recorded", reporter, kind)
    else:
        victim = _victim(event, regarding_field)
        match = _VOLCANO_EVICT.match(event.message)
        why = f"volcano {match.group('action')}" if match else f"volcano evict; {UNRECOGNISED}"
        found = Preemption(victim, event.first_time, None, why + "; preemptor not recorded", reporter, kind)
    found = replace(found, victim=event.regarding)
    links = [found]
    if event.last_time is not None:
        again = found.preemptor_job_id if event.repeated_verbatim else None
        note = found.reason if again or "preemptor not recorded" in found.reason else (
            found.reason + "; repeat in an event series, preemptor not recorded"
        )
        links.append(replace(found, time=event.last_time, preemptor_job_id=again, reason=note))
    return links
