"""Jobs and runs from Kueue Workloads, GPU pods and KAI PodGroups.

Pure functions over the API's JSON. Objects give jobs and runs; the
victim-to-preemptor links come from events (events).

- Kueue Workload: one job (job_id = the Workload's UID, stable over all its
  admissions). The run number is the eviction count + 1 (the counts of
  `status.schedulingStats.evictions`; before Kueue 0.12 there is no count and
  a workload with an `Evicted` condition is taken as evicted once). The
  current run: pending (queued or requeued), running (`Admitted`; cancelled
  at its deletionTimestamp once deleted while admitted), or
  completed / failed (`Finished`). The run the last eviction ended is given
  too, from the conditions, whether the Workload is seen evicted (`Evicted`
  True) or already admitted again (`Requeued` True and the "Previously: "
  messages): preempted (eviction reason `Preempted`) or requeued, with the
  preemptor UID and reason from the `Preempted` condition; _evicted_run says
  which times are read. Its pool, once Kueue has cleared `status.admission`,
  is the one GPU flavor of the ClusterQueue its LocalQueue points to
  (KueueQueues), else that ClusterQueue.
- Pod that requests GPUs and is managed neither by Kueue (label
  `kueue.x-k8s.io/queue-name`: the Workload is the job) nor by KAI
  (annotation `pod-group-name`: the PodGroup is, gangs): one job and one run
  (job_id = the pod's UID; a controller's replacement pod has a new UID and
  is a new job). A pod with the condition DisruptionTarget and reason
  PreemptionByScheduler (1.27 on, Volcano, KAI with
  --update-pod-eviction-condition) or PreemptionByKubeScheduler (1.25, 1.26)
  ends preempted; one deleted while running with no such condition ends
  cancelled (reason `deleted`) at its containers' end, else at its
  deletionTimestamp. Its pool is `cluster` (CLUSTER_POOL): kube-scheduler,
  not a Kueue flavor, chose its node.
- KAI PodGroup: one job, job_id = "<namespace>/<name>" (how KAI's evictor
  annotations name a preemptor and its podgrouper a pod's group); its runs
  are made of its pods (kai_member, gangs), whether or not PodGroups are read.

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
    PREVIOUSLY,
    ParseError,
    kai_victim,
    kueue_reason_text,
    kueue_rule_preemptor,
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
# The KAI queue of a pod (or of its top owner, from which the podgrouper writes the PodGroup's spec.queue).
KAI_QUEUE_LABEL = "kai.scheduler/queue"
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


@dataclass(frozen=True)
class KueueQueues:
    """Where a Workload's quota comes from when its admission is gone: LocalQueue -> ClusterQueue, and the
    GPU flavors each ClusterQueue has a quota of (pools)."""

    local: Mapping[tuple[str, str], str]  # (namespace, LocalQueue) -> ClusterQueue
    gpu_flavors: Mapping[str, tuple[str, ...]]  # ClusterQueue -> flavors with a quota of the GPU resource

    def cluster_queue(self, namespace: str | None, local_queue: str | None) -> str | None:
        return self.local.get((namespace or "", local_queue or "")) if local_queue else None

    def pool(self, cluster_queue: str) -> str:
        """A ClusterQueue's pool: its one GPU flavor, else (several, or none known) the queue itself."""
        flavors = self.gpu_flavors.get(cluster_queue, ())
        return flavors[0] if len(flavors) == 1 else cluster_queue


def parse_local_queue(obj: Any) -> tuple[tuple[str, str], str]:
    """A Kueue LocalQueue: ((namespace, name), its ClusterQueue), the same in v1beta1 and v1beta2."""
    if not isinstance(obj, Mapping):
        raise ParseError("object", f"must be an object (got {type(obj).__name__})")
    meta = mapping(obj.get("metadata"), "metadata")
    key = (required_text(meta.get("namespace"), "metadata.namespace"), required_text(meta.get("name"), "metadata.name"))
    return key, required_text(mapping(obj.get("spec"), "spec").get("clusterQueue"), "spec.clusterQueue")


def _after(cond: Mapping[str, Any] | None, name: str, status: str, at: datetime | None) -> datetime | None:
    """The time of a condition in `status`, when it is not before `at`."""
    if cond is None or cond.get("status") != status or not cond.get("lastTransitionTime"):
        return None
    when = _cond_time(cond, name)
    return when if at is None or when >= at else None


def workload_rows(obj: Any, tiering: ClusterSettings, gpu_resource: str, queues: KueueQueues | None = None) -> Rows:
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
    if pool is None and cluster_queue is None and queues is not None:
        # Kueue clears the admission at eviction: the LocalQueue still says whose quota it ran on.
        cluster_queue = queues.cluster_queue(text(meta.get("namespace"), "metadata.namespace"),
                                             text(spec.get("queueName"), "spec.queueName"))
        pool = queues.pool(cluster_queue) if cluster_queue else None
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
    requeued = conds.get("Requeued")
    if evictions:
        # the run after the last eviction is numbered n + 1: that too must fit
        n = bounded(sum(quantity(e.get("count", 0), f"{evictions_field}[{i}].count")
                        for i, e in enumerate(evictions)) + 1, evictions_field) - 1
    else:
        # before Kueue 0.12 nothing counts evictions: an Evicted condition says there was one at least
        n = 1 if evicted is not None or _is_true(requeued) else 0
    accumulated, accumulated_field = None, ""
    for key in ACCUMULATED_FIELDS:
        if key in status:
            accumulated, accumulated_field = _number(status[key], f"status.{key}"), f"status.{key}"
            if accumulated is not None and not 0 <= accumulated <= MAX_EPOCH_S:
                raise ParseError(accumulated_field, f"must be 0 to {MAX_EPOCH_S:.0f} seconds (got {accumulated!r})")

    base = {"job_id": uid, "pool": job["pool"], "hosts": None, "gpus": gpus}
    if n == 0:
        submit = created
    elif requeued is not None and requeued.get("lastTransitionTime"):
        submit = _cond_time(requeued, "Requeued")
    elif evicted is not None:
        submit = _cond_time(evicted, "Evicted")
    else:
        submit = None
    finished = conds.get("Finished")
    admitted = conds.get("Admitted") or conds.get("QuotaReserved")
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
        deleted = optional_time(meta, "deletionTimestamp", "metadata.deletionTimestamp")
        if deleted is not None and deleted >= current["start_time"]:
            # Deleted while admitted (its job deleted, or a user's delete; Kueue's finalizer keeps it until its
            # pods are gone): the run ends there, as a deleted pod's does, and only a preemption its state
            # records, never an event alone, makes it one (corroborate)
            current.update(state="cancelled", reason="deleted", end_time=deleted)
    else:
        current["state"] = "pending"
    runs = [current]
    if n > 0:
        ended = _evicted_run(conds, created, accumulated if n == 1 else None, accumulated_field,
                             current["start_time"] if current["state"] != "pending" else None)
        if ended is not None:
            runs.append({**base, "run": n, "submit_time": created if n == 1 else None, "eligible_time": None,
                         **ended})
    return Rows([job], runs)


def _evicted_run(
    conds: Mapping[str, Mapping[str, Any]],
    created: datetime,
    accumulated: float | None,
    accumulated_field: str,
    readmitted_at: datetime | None,
) -> dict[str, Any] | None:
    """The run the last eviction ended (docs/kubernetes.md, "A Workload seen after its eviction").

    While `Evicted` is True the eviction is the condition's; after a re-admission only the `Requeued`
    condition (True, with the eviction's reason) and the "Previously: " messages of `Evicted` and
    `Preempted` remain. The run ends when it gave its quota back (`Requeued` True or `QuotaReserved` False
    from the eviction on: the victim stopped), else at the eviction. Its start is the admission while it is
    still admitted (stopping), else its quota release minus `accumulatedPast...ExecutionTimeSeconds`, which
    holds the admitted time of all past runs and so only the first run's; never before the object existed.
    """
    evicted, requeued = conds.get("Evicted"), conds.get("Requeued")
    preempted = conds.get("Preempted")
    admitted = conds.get("Admitted") or conds.get("QuotaReserved")
    if _is_true(evicted) and evicted is not None:
        at: datetime | None = _cond_time(evicted, "Evicted")
        cause = text(evicted.get("reason"), "status.conditions[Evicted].reason")
        message = text(evicted.get("message"), "status.conditions[Evicted].message") or ""
    elif (evicted is not None and _is_true(requeued) and requeued is not None and readmitted_at is not None
          and (text(evicted.get("message"), "status.conditions[Evicted].message") or "").startswith(PREVIOUSLY)):
        at = None
        cause = text(requeued.get("reason"), "status.conditions[Requeued].reason")
        message = text(evicted.get("message"), "status.conditions[Evicted].message") or ""
    else:
        return None
    stopped = (_after(requeued, "Requeued", "True", at) or _after(conds.get("QuotaReserved"), "QuotaReserved",
                                                                     "False", at))
    end = stopped or at
    if end is None or (at is None and readmitted_at is not None and end > readmitted_at):
        # re-admitted, and no time of the eviction before the admission: nothing to say when it ended
        return None
    start = None
    if at is not None and _is_true(admitted) and admitted is not None and _cond_time(admitted, "Admitted") <= at:
        start = _cond_time(admitted, "Admitted")
    elif accumulated is not None:
        anchor = _after(conds.get("Admitted"), "Admitted", "False", at) or end
        try:
            start = anchor - timedelta(seconds=accumulated)
        except OverflowError:
            raise ParseError(accumulated_field, "reaches back before year 1 from the eviction") from None
    if start is not None:
        start = max(start, created)
        if start > end:
            start = None
    preemptor, why = None, cause
    if cause == "Preempted":
        # the Preempted condition's message, this eviction's (True) or kept from it (False, "Previously: ")
        said = text(preempted.get("message"), "status.conditions[Preempted].message") if preempted else None
        if said is None or not (_is_true(preempted) or said.startswith(PREVIOUSLY)):
            said = message
        parsed = parse_kueue_preempted(said)
        preemptor = parsed.preemptor_uid if parsed else kueue_rule_preemptor(said)
        code = text(preempted.get("reason"), "status.conditions[Preempted].reason") if (
            preempted is not None and _is_true(preempted)) else None
        # the state says preempted already: a reason is only what Kueue says beyond that (else a link's)
        why = code or (parsed.reason if parsed else None) or kueue_reason_text(said)
    return {"start_time": start, "end_time": end, "state": "preempted" if cause == "Preempted" else "requeued",
            "preemptor_job_id": preemptor, "reason": why}


# DisruptionTarget reasons of a pod the scheduler preempted: 1.25 and 1.26 wrote the first, 1.27 on the second
# (kubernetes/kubernetes#114623); Volcano and KAI (--update-pod-eviction-condition) write the second.
PREEMPTION_REASONS = frozenset({"PreemptionByKubeScheduler", "PreemptionByScheduler"})
# 1.26.0 named the preemptor in the condition's message ("...: <namespace>/<name>"); later releases do not.
_DISRUPTION_BY = re.compile(r"higher priority pod: (?P<ns>[a-z0-9][-a-z0-9.]*)/(?P<name>[^\s/]+)$")


def _pod_run(obj: Any, gpu_resource: str) -> tuple[Mapping[str, Any], str, datetime, Mapping[str, Any], dict[str, Any]]:
    """A GPU pod's run, whoever schedules it: (metadata, uid, creation, spec, run row without job and pool)."""
    meta, uid, created = _meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
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
    reason, preemptor = None, None
    if _is_true(disruption) and disruption is not None:
        why = text(disruption.get("reason"), "status.conditions[DisruptionTarget].reason") or ""
        message = text(disruption.get("message"), "status.conditions[DisruptionTarget].message") or ""
        state = "preempted" if why in PREEMPTION_REASONS else "failed"
        reason = f"{why}: {message}" if message else why
        finished = finished or _cond_time(disruption, "DisruptionTarget")
        named = _DISRUPTION_BY.search(message) if state == "preempted" else None
        if named:
            preemptor = f"{named.group('ns')}/{named.group('name')}"
    elif phase == "Succeeded":
        state = "completed"
    elif deleted is not None and phase in ("Running", "Failed") and (
            finished is None or finished >= _delete_requested(meta, spec, deleted)):
        # Deleted while running and no condition says why (a user's delete, an eviction that records
        # nothing, such as KAI's without --update-pod-eviction-condition; the kubelet may leave it Failed as its
        # containers stop): the run ends there, and only a preemption event bound to it can make it a preemption.
        state, reason = "cancelled", "deleted"
        finished = finished or deleted
    elif phase == "Failed":
        state = "failed"
        reason = text(status.get("reason"), "status.reason")
    elif phase == "Running":
        state, finished = "running", None
    else:
        state, finished = "pending", None
    start = optional_time(status, "startTime", "status.startTime")
    if finished is not None and start is not None and finished < start:
        raise ParseError("status.containerStatuses", "end before the pod's startTime")
    run = {
        "run": 1, "hosts": text(spec.get("nodeName"), "spec.nodeName"),
        "gpus": pod_gpus(spec, gpu_resource, "spec"), "submit_time": created, "eligible_time": created,
        "start_time": start, "end_time": finished, "state": state, "preemptor_job_id": preemptor, "reason": reason,
    }
    return meta, uid, created, spec, run


def _delete_requested(meta: Mapping[str, Any], spec: Mapping[str, Any], deleted: datetime) -> datetime:
    """When a pod's delete was asked for: its deletionTimestamp is that plus the grace period it was given."""
    grace = _number(meta.get("deletionGracePeriodSeconds"), "metadata.deletionGracePeriodSeconds")
    if grace is None:
        grace = _number(spec.get("terminationGracePeriodSeconds"), "spec.terminationGracePeriodSeconds")
    grace = 30.0 if grace is None else grace  # the API's default grace period
    if not 0 <= grace <= MAX_EPOCH_S:
        raise ParseError("metadata.deletionGracePeriodSeconds",
                         f"must be 0 to {MAX_EPOCH_S:.0f} seconds (got {grace!r})")
    try:
        return deleted - timedelta(seconds=grace)
    except OverflowError:
        raise ParseError("metadata.deletionTimestamp", "less its grace period is before year 1") from None


def pod_rows(obj: Any, tiering: ClusterSettings, gpu_resource: str) -> Rows:
    """A GPU pod that neither Kueue (its Workload is the job) nor KAI (its PodGroup is, gangs) manages:
    one job, one run. Other pods give nothing."""
    meta = mapping(obj.get("metadata"), "metadata") if isinstance(obj, Mapping) else {}
    if KUEUE_QUEUE_LABEL in mapping(meta.get("labels"), "metadata.labels") or \
            KAI_PODGROUP_ANNOTATION in mapping(meta.get("annotations"), "metadata.annotations"):
        return Rows([], [])
    meta, uid, created, spec, run = _pod_run(obj, gpu_resource)
    if run["gpus"] == 0:
        return Rows([], [])
    priority_class = text(spec.get("priorityClassName"), "spec.priorityClassName")
    tier = tiering.tier_of(priority_class)
    job = _job_row(meta, spec, uid, created, priority_class, tier, tiering, run["gpus"], CLUSTER_POOL)
    return Rows([job], [{**run, "job_id": uid, "pool": CLUSTER_POOL}])


@dataclass(frozen=True)
class Member:
    """A pod of a KAI PodGroup: what the PodGroup's job and runs are made of (gangs)."""

    group: str  # the PodGroup's job id, "<namespace>/<name>"
    uid: str
    alias: str  # "<namespace>/<pod name>", the label GPU samples carry
    created: datetime
    priority_class: str | None
    priority_value: float | None
    queue: str | None
    run: Mapping[str, Any]  # the pod's own run (_pod_run)
    stop: datetime | None  # when it was told to stop (DisruptionTarget, a delete), or ended; None while it runs


def kai_member(obj: Any, gpu_resource: str) -> Member | None:
    """The PodGroup membership of a pod KAI's podgrouper put in one (annotation `pod-group-name`); None for
    any other pod."""
    if not isinstance(obj, Mapping):
        return None
    meta = mapping(obj.get("metadata"), "metadata")
    group = text(mapping(meta.get("annotations"), "metadata.annotations").get(KAI_PODGROUP_ANNOTATION),
                 f"metadata.annotations.{KAI_PODGROUP_ANNOTATION}")
    if not group:
        return None
    meta, uid, created, spec, run = _pod_run(obj, gpu_resource)
    namespace = required_text(meta.get("namespace"), "metadata.namespace")
    labels = mapping(meta.get("labels"), "metadata.labels")
    disruption = _conditions(mapping(obj.get("status"), "status"), "status").get("DisruptionTarget")
    deleted = optional_time(meta, "deletionTimestamp", "metadata.deletionTimestamp")
    if _is_true(disruption) and disruption is not None:
        stop: datetime | None = _cond_time(disruption, "DisruptionTarget")
    elif deleted is not None:
        stop = _delete_requested(meta, spec, deleted)
    else:
        stop = run["end_time"] if run["state"] not in ("running", "pending") else None
    return Member(
        group=kai_victim(namespace, group) or group,
        uid=uid,
        alias=f"{namespace}/{required_text(meta.get('name'), 'metadata.name')}",
        created=created,
        priority_class=text(spec.get("priorityClassName"), "spec.priorityClassName"),
        priority_value=_number(spec.get("priority"), "spec.priority"),
        queue=text(labels.get(KAI_QUEUE_LABEL), f"metadata.labels.{KAI_QUEUE_LABEL}"),
        run=run,
        stop=stop,
    )


def podgroup_rows(obj: Any, tiering: ClusterSettings, gpu_resource: str) -> Rows:
    """A KAI PodGroup's job (its runs come from its pods, gangs), under "<namespace>/<name>"."""
    meta, _, created = _meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
    resources = mapping(status.get("resourcesStatus"), "status.resourcesStatus")
    gpus = 0
    # What its pods ask for outlives an eviction, which sets what is allocated to 0.
    for key in ("requested", "allocated"):
        held = mapping(resources.get(key), f"status.resourcesStatus.{key}")
        if gpu_resource in held:
            gpus = max(gpus, quantity(held[gpu_resource], f"status.resourcesStatus.{key}.{gpu_resource}"))
    priority_class = text(spec.get("priorityClassName"), "spec.priorityClassName")
    queue = text(spec.get("queue"), "spec.queue")
    tier = tiering.tier_of(priority_class, queue)
    namespace = required_text(meta.get("namespace"), "metadata.namespace")
    name = required_text(meta.get("name"), "metadata.name")
    job = {
        "job_id": kai_victim(namespace, name),
        "name": name,
        "team": namespace,
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
