"""Jobs and runs from Kueue Workloads, GPU pods and KAI PodGroups.

Pure functions over the API's JSON. Objects give jobs and runs; the
victim-to-preemptor links come from events (events).

- Kueue Workload: one job (job_id = the Workload's UID, stable over all its
  admissions). The run number is the eviction count + 1 (the counts of
  `status.schedulingStats.evictions`; before Kueue 0.12 there is no count and
  a workload with an `Evicted` condition is taken as evicted once). The
  current run: pending (queued or requeued), running (`Admitted`), or
  completed / failed (`Finished`). While `Evicted` is True the run it ended is
  given too: preempted (eviction reason `Preempted`) or requeued, ending at
  the condition's time, with the preemptor UID and reason from the `Preempted`
  condition. Its start is known only for the first run (end minus
  `accumulatedPastExexcutionTimeSeconds`, v1beta1 spelling, or
  `accumulatedPastExecutionTimeSeconds`, v1beta2).
- Pod that requests GPUs and is not managed by Kueue (no
  `kueue.x-k8s.io/queue-name` label, those are counted as Workloads), nor,
  when PodGroups are read, by KAI (no `pod-group-name` annotation): one
  job and one run (job_id = the pod's UID; a controller's replacement pod has
  a new UID and is a new job). A pod with the condition
  DisruptionTarget/PreemptionByScheduler (kube-scheduler, Volcano, KAI with
  --update-pod-eviction-condition) ends preempted; one deleted while running
  with no such condition ends cancelled (reason `deleted`) at its containers'
  end, else at its deletionTimestamp. Its pool is `cluster`
  (CLUSTER_POOL): kube-scheduler, not a Kueue flavor, chose its node.
- KAI PodGroup: one job (job_id = its UID, matching the victim of KAI `Evict`
  events); GPUs from the pods it names are unknown here, so 0 unless
  `status.resourcesStatus.allocated` says.

Tiers: the PriorityClass name when `cluster.tiers` names it, else the Kueue
ClusterQueue (or KAI queue) name when it does, else `cluster.default_tier`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from preemptlens.collectors.kubernetes.events import (
    ParseError,
    mapping,
    optional_time,
    parse_kueue_preempted,
    parse_time,
    required_text,
    text,
)
from preemptlens.config import ClusterSettings
from preemptlens.contract import MAX_EPOCH_S

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# KAI's podgrouper puts every pod it schedules in a PodGroup and names it here.
KAI_PODGROUP_ANNOTATION = "pod-group-name"
ACCUMULATED_FIELDS = ("accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")
# The pool of GPU pods that Kueue does not manage: no flavor was chosen for them, so their capacity
# is the GPUs of the nodes that no GPU ResourceFlavor selects (pools).
CLUSTER_POOL = "cluster"

# The quantity grammar of k8s.io/apimachinery: a signed decimal, then a binary-SI, decimal-exponent
# or decimal-SI suffix. "1E" is one exa, "1E3" a thousand: the exponent alternative needs digits.
_QUANTITY = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[mkMGTPE]?)")
_SUFFIXES = {
    "": Decimal(1), "m": Decimal("0.001"), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
# Counts land in INTEGER columns; an exponent beyond this could not be one anyway.
MAX_COUNT = 2**31 - 1
_MAX_EXPONENT = 30


@dataclass
class Rows:
    jobs: list[dict[str, Any]]
    runs: list[dict[str, Any]]


def _number(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(field, f"must be a number (got {value!r})")
    return float(value)


def quantity(value: Any, field: str) -> int:
    """A whole count from a Kubernetes quantity: 2, "2", and the canonical forms the API
    server writes back ("1k" for 1000, "2Ki", "1e3"); a fraction ("500m") is no count."""
    if isinstance(value, bool):
        raise ParseError(field, f"must be a whole count (got {value!r})")
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, str) and (match := _QUANTITY.fullmatch(value.strip())):
        number, suffix = match.group(1), match.group(2)
        if suffix[:1] in ("e", "E") and len(suffix) > 1:
            exponent = int(suffix[1:])
            if abs(exponent) > _MAX_EXPONENT:
                raise ParseError(field, f"is out of range (got {value!r})")
            amount = Decimal(number).scaleb(exponent)
        else:
            amount = Decimal(number) * _SUFFIXES[suffix]
    else:
        raise ParseError(field, f"must be a whole count (got {value!r})")
    if amount != amount.to_integral_value():
        raise ParseError(field, f"must be a whole count (got {value!r})")
    if amount < 0:
        raise ParseError(field, f"must be >= 0 (got {value!r})")
    if amount > MAX_COUNT:
        raise ParseError(field, f"is out of range (got {value!r})")
    return int(amount)


def bounded(total: int, field: str) -> int:
    """A count made of several (a sum, pods x GPUs per pod) as an INTEGER column holds it."""
    if total > MAX_COUNT:
        raise ParseError(field, f"add up to {total:,}, out of range")
    return total


def sequence(value: Any, field: str) -> Sequence[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(field, f"must be a list (got {type(value).__name__})")
    return value


def pod_gpus(spec: Mapping[str, Any], resource: str, field: str) -> int:
    """GPUs a pod asks for: the sum over its containers of requests (or limits)."""
    total = 0
    for i, container in enumerate(sequence(spec.get("containers"), f"{field}.containers")):
        where = f"{field}.containers[{i}].resources"
        resources = mapping(mapping(container, f"{field}.containers[{i}]").get("resources"), where)
        requests = mapping(resources.get("requests"), f"{where}.requests")
        limits = mapping(resources.get("limits"), f"{where}.limits")
        if resource in requests:
            total += quantity(requests[resource], f"{where}.requests.{resource}")
        elif resource in limits:
            total += quantity(limits[resource], f"{where}.limits.{resource}")
    return bounded(total, f"{field}.containers")


def _conditions(status: Mapping[str, Any], field: str) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for i, cond in enumerate(sequence(status.get("conditions"), f"{field}.conditions")):
        cond = mapping(cond, f"{field}.conditions[{i}]")
        kind = required_text(cond.get("type"), f"{field}.conditions[{i}].type")
        found[kind] = cond
    return found


def _is_true(cond: Mapping[str, Any] | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def _cond_time(cond: Mapping[str, Any], name: str) -> datetime:
    return parse_time(cond.get("lastTransitionTime"), f"status.conditions[{name}].lastTransitionTime")


def _meta(obj: Any) -> tuple[Mapping[str, Any], str, datetime]:
    if not isinstance(obj, Mapping):
        raise ParseError("object", f"must be an object (got {type(obj).__name__})")
    meta = mapping(obj.get("metadata"), "metadata")
    uid = required_text(meta.get("uid"), "metadata.uid")
    created = parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    return meta, uid, created


def _job_row(
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    uid: str,
    created: datetime,
    priority_class: str | None,
    tier: str,
    tiering: ClusterSettings,
    gpus: int,
    pool: str | None,
) -> dict[str, Any]:
    """The jobs row of a Workload or a pod: both carry name, namespace and priority alike."""
    return {
        "job_id": uid,
        "name": text(meta.get("name"), "metadata.name"),
        "team": text(meta.get("namespace"), "metadata.namespace"),
        "user_name": None,
        "priority_class": priority_class,
        "priority_value": _number(spec.get("priority"), "spec.priority"),
        "tier": tier,
        "preemptible": tier in tiering.preemptible_tiers,
        "pool": pool,
        "gpus": gpus,
        "submit_time": created,
    }


def workload_rows(obj: Any, tiering: ClusterSettings, gpu_resource: str) -> Rows:
    meta, uid, created = _meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
    gpus = 0
    for i, pod_set in enumerate(sequence(spec.get("podSets"), "spec.podSets")):
        pod_set = mapping(pod_set, f"spec.podSets[{i}]")
        count = quantity(pod_set.get("count", 1), f"spec.podSets[{i}].count")
        template = mapping(pod_set.get("template"), f"spec.podSets[{i}].template")
        pod_spec = mapping(template.get("spec"), f"spec.podSets[{i}].template.spec")
        gpus = bounded(gpus + count * pod_gpus(pod_spec, gpu_resource, f"spec.podSets[{i}].template.spec"),
                       f"spec.podSets[{i}].count")
    admission = mapping(status.get("admission"), "status.admission")
    cluster_queue = text(admission.get("clusterQueue"), "status.admission.clusterQueue")
    pool = None
    for i, assignment in enumerate(sequence(admission.get("podSetAssignments"), "status.admission.podSetAssignments")):
        flavors = mapping(mapping(assignment, f"status.admission.podSetAssignments[{i}]").get("flavors"),
                          f"status.admission.podSetAssignments[{i}].flavors")
        pool = pool or text(flavors.get(gpu_resource), f"status.admission.podSetAssignments[{i}].flavors")
    priority_class = text(spec.get("priorityClassName"), "spec.priorityClassName")
    tier = tiering.tier_of(priority_class, cluster_queue)
    job = _job_row(meta, spec, uid, created, priority_class, tier, tiering, gpus, pool or cluster_queue)

    conds = _conditions(status, "status")
    stats = mapping(status.get("schedulingStats"), "status.schedulingStats")
    evictions_field = "status.schedulingStats.evictions"
    evictions = [
        mapping(e, f"{evictions_field}[{i}]") for i, e in enumerate(sequence(stats.get("evictions"), evictions_field))
    ]
    evicted = conds.get("Evicted")
    if evictions:
        # the run after the last eviction is numbered n + 1: that too must fit
        n = bounded(sum(quantity(e.get("count", 0), f"{evictions_field}[{i}].count")
                        for i, e in enumerate(evictions)) + 1, evictions_field) - 1
    else:
        n = 1 if evicted is not None or _is_true(conds.get("Requeued")) else 0
    accumulated, accumulated_field = None, ""
    for key in ACCUMULATED_FIELDS:
        if key in status:
            accumulated, accumulated_field = _number(status[key], f"status.{key}"), f"status.{key}"
            if accumulated is not None and not 0 <= accumulated <= MAX_EPOCH_S:
                raise ParseError(accumulated_field, f"must be 0 to {MAX_EPOCH_S:.0f} seconds (got {accumulated!r})")

    runs: list[dict[str, Any]] = []
    base = {"job_id": uid, "pool": job["pool"], "hosts": None, "gpus": gpus}
    requeued = conds.get("Requeued")
    if n == 0:
        submit = created
    elif requeued is not None and requeued.get("lastTransitionTime"):
        submit = _cond_time(requeued, "Requeued")
    elif evicted is not None:
        submit = _cond_time(evicted, "Evicted")
    else:
        submit = None
    finished, admitted = conds.get("Finished"), conds.get("Admitted") or conds.get("QuotaReserved")
    current: dict[str, Any] = {**base, "run": n + 1, "submit_time": submit, "eligible_time": submit,
                               "start_time": None, "end_time": None, "preemptor_job_id": None, "reason": None}
    if _is_true(finished) and finished is not None:
        outcome = text(finished.get("reason"), "status.conditions[Finished].reason") or ""
        current["state"] = "failed" if "fail" in outcome.lower() else "completed"
        current["end_time"] = _cond_time(finished, "Finished")
        current["reason"] = outcome or None
        if _is_true(admitted) and admitted is not None:
            current["start_time"] = _cond_time(admitted, "Admitted")
    elif _is_true(admitted) and admitted is not None and not _is_true(evicted):
        current["state"] = "running"
        current["start_time"] = _cond_time(admitted, "Admitted")
    else:
        current["state"] = "pending"
    runs.append(current)

    if n > 0 and _is_true(evicted) and evicted is not None:
        end = _cond_time(evicted, "Evicted")
        evict_reason = text(evicted.get("reason"), "status.conditions[Evicted].reason")
        preempted = conds.get("Preempted")
        preemptor, why = None, evict_reason
        if evict_reason == "Preempted" and _is_true(preempted) and preempted is not None:
            why = text(preempted.get("reason"), "status.conditions[Preempted].reason") or why
            parsed = parse_kueue_preempted(text(preempted.get("message"), "status.conditions[Preempted].message") or "")
            preemptor = parsed.preemptor_uid if parsed else None
        start = None
        if n == 1 and accumulated is not None:
            try:
                start = end - timedelta(seconds=accumulated)
            except OverflowError:
                raise ParseError(accumulated_field, "reaches back before year 1 from the eviction") from None
        runs.append({**base, "run": n, "submit_time": created if n == 1 else None, "eligible_time": None,
                     "start_time": start, "end_time": end,
                     "state": "preempted" if evict_reason == "Preempted" else "requeued",
                     "preemptor_job_id": preemptor, "reason": why})
    return Rows([job], runs)


def pod_rows(obj: Any, tiering: ClusterSettings, gpu_resource: str, podgroups: bool = False) -> Rows:
    """A GPU pod not managed by Kueue, nor by KAI when `podgroups` (its PodGroup is the job then): one
    job, one run. Other pods give nothing."""
    meta, uid, created = _meta(obj)
    labels = mapping(meta.get("labels"), "metadata.labels")
    spec = mapping(obj.get("spec"), "spec")
    gpus = pod_gpus(spec, gpu_resource, "spec")
    if gpus == 0 or KUEUE_QUEUE_LABEL in labels:
        return Rows([], [])
    if podgroups and KAI_PODGROUP_ANNOTATION in mapping(meta.get("annotations"), "metadata.annotations"):
        return Rows([], [])
    status = mapping(obj.get("status"), "status")
    priority_class = text(spec.get("priorityClassName"), "spec.priorityClassName")
    tier = tiering.tier_of(priority_class)
    job = _job_row(meta, spec, uid, created, priority_class, tier, tiering, gpus, CLUSTER_POOL)
    conds = _conditions(status, "status")
    finished: datetime | None = None
    for key in ("containerStatuses", "initContainerStatuses"):
        for i, cs in enumerate(sequence(status.get(key), f"status.{key}")):
            cstate = mapping(mapping(cs, f"status.{key}[{i}]").get("state"), f"status.{key}[{i}].state")
            ended = mapping(cstate.get("terminated"), f"status.{key}[{i}].state.terminated")
            at = optional_time(ended, "finishedAt", f"status.{key}[{i}].state.terminated.finishedAt")
            if at is not None and (finished is None or at > finished):
                finished = at
    phase = text(status.get("phase"), "status.phase")
    deleted = optional_time(meta, "deletionTimestamp", "metadata.deletionTimestamp")
    disruption = conds.get("DisruptionTarget")
    reason = None
    if _is_true(disruption) and disruption is not None:
        why = text(disruption.get("reason"), "status.conditions[DisruptionTarget].reason") or ""
        message = text(disruption.get("message"), "status.conditions[DisruptionTarget].message") or ""
        state = "preempted" if why == "PreemptionByScheduler" else "failed"
        reason = f"{why}: {message}" if message else why
        finished = finished or _cond_time(disruption, "DisruptionTarget")
    elif phase == "Succeeded":
        state = "completed"
    elif phase == "Failed":
        state = "failed"
        reason = text(status.get("reason"), "status.reason")
    elif phase == "Running" and deleted is not None:
        # Deleted while running and no condition says why (a user's delete, an eviction that records
        # nothing, such as KAI's without --update-pod-eviction-condition): the run ends there, and
        # only a preemption event bound to it can make it a preemption.
        state, reason = "cancelled", "deleted"
        finished = finished or deleted
    elif phase == "Running":
        state, finished = "running", None
    else:
        state, finished = "pending", None
    start = optional_time(status, "startTime", "status.startTime")
    if finished is not None and start is not None and finished < start:
        raise ParseError("status.containerStatuses", "end before the pod's startTime")
    run = {
        "job_id": uid, "run": 1, "pool": CLUSTER_POOL, "hosts": text(spec.get("nodeName"), "spec.nodeName"),
        "gpus": gpus, "submit_time": created, "eligible_time": created, "start_time": start,
        "end_time": finished, "state": state, "preemptor_job_id": None, "reason": reason,
    }
    return Rows([job], [run])


def podgroup_rows(obj: Any, tiering: ClusterSettings, gpu_resource: str) -> Rows:
    meta, uid, created = _meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
    allocated = mapping(mapping(status.get("resourcesStatus"), "status.resourcesStatus").get("allocated"),
                        "status.resourcesStatus.allocated")
    gpus = quantity(allocated[gpu_resource], f"status.resourcesStatus.allocated.{gpu_resource}") \
        if gpu_resource in allocated else 0
    priority_class = text(spec.get("priorityClassName"), "spec.priorityClassName")
    queue = text(spec.get("queue"), "spec.queue")
    tier = tiering.tier_of(priority_class, queue)
    job = {
        "job_id": uid,
        "name": text(meta.get("name"), "metadata.name"),
        "team": text(meta.get("namespace"), "metadata.namespace"),
        "user_name": None,
        "priority_class": priority_class,
        "priority_value": None,
        "tier": tier,
        "preemptible": tier in tiering.preemptible_tiers,
        "pool": queue,
        "gpus": gpus,
        "submit_time": created,
    }
    return Rows([job], [])
