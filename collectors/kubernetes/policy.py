"""The preemption policy Kueue ClusterQueues and KAI Queues state, as `scheduler_policy` rows.

The replay reads these instead of guessing the rules from the ledger (analytics/whatif/policy_in_force.py). Fields,
as the projects define them (kueue apis/kueue/v1beta1|v1beta2/clusterqueue_types.go and the ClusterQueue
concept page; KAI pkg/apis/scheduling/v2/queue_types.go and docs/plugins/minruntime.md):

- ClusterQueue `spec.preemption.withinClusterQueue` (Never, LowerPriority, LowerOrNewerEqualPriority; default
  Never), `reclaimWithinCohort` (Never, LowerPriority, Any; default Never), `borrowWithinCohort.policy` and
  `.maxPriorityThreshold`, `spec.cohort` (v1beta1) or `spec.cohortName` (v1beta2), `spec.queueingStrategy`
  (default BestEffortFIFO), `spec.fairSharing.weight`.
- KAI Queue `spec.preemptMinRuntime` and `spec.reclaimMinRuntime` (Go durations: the minimum run of the queue's
  jobs before preemption or reclaim; inherited from the parent queue when unset), `spec.priority`,
  `spec.parentQueue`.
- KAI PodGroup `spec.preemptionDelay` (scheduling.run.ai/v2alpha2, released in KAI v0.17.0; kai-scheduler/
  KAI-Scheduler pkg/apis/scheduling/v2alpha2/podgroup_types.go): how long a PodGroup must be pending, from its
  creation or its last eviction, before it may evict others (preempt, reclaim, consolidation:
  pkg/scheduler/api/podgroup_info/job_info.go `PreemptionDelayEnd`). The podgrouper copies it from the
  `kai.scheduler/preemption-delay` annotation of the workload or its pods (an annotation, not the label KAI#1886
  first read: KAI#1890 moved it before the release). A workload's setting, so the snapshot states the one most
  PodGroups that set a delay carry, and whether every PodGroup listed carries it.

Durations become seconds. One snapshot is written when any value differs from the last one stored (the cursor
is their digest), with the scheduler whose jobs the collection reads: Kueue's when it reads Workloads, else
KAI's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from preemptlens import outbound
from preemptlens.contract import Batch, Watermark

if TYPE_CHECKING:
    from preemptlens.collectors.kubernetes.watch import WatchBounds


class KubernetesCollector(Protocol):
    """What the policy read takes from the source (collectors/kubernetes/__init__.py), named here so that the
    package's modules import one way: the source imports this module, never the other way round."""

    api_client: Any
    streams: list[Any]
    kueue_version: str
    read_kai_queues: bool
    cluster: str
    watch: WatchBounds

log = logging.getLogger(__name__)

Row = tuple[str, str, str, str, str]  # scope, subject, setting, value, raw
_STREAM = "policy"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PREEMPTION_DEFAULTS = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
# The whole read of one scheduler's queues, every page: a total deadline (a socket timeout bounds one read, not an
# answer dripped a byte at a time, nor an endless run of pages) and a cap on the bytes read, as the collector's
# lists have per page (watch.LIST_DEADLINE_S, watch.MAX_LIST_BYTES). Queues are few and small (an object is at
# most 1.5 MiB in etcd): 64 MiB holds far more than any cluster states.
READ_DEADLINE_S = 70.0
MAX_READ_BYTES = 64 * 2**20


def go_duration_s(text: Any) -> float | None:
    """Seconds of a Go duration ("20s", "1h30m", "0s"); None when it is not one."""
    if not isinstance(text, str) or not text:
        return None
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    return total if pos == len(text) else None


def _name(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


def _spec(obj: Any) -> dict[str, Any]:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec if isinstance(spec, dict) else {}


def cluster_queue_rows(obj: Any) -> list[Row]:
    """One ClusterQueue's preemption settings (its defaults where the spec leaves them out)."""
    name = _name(obj)
    if name is None:
        return []
    spec = _spec(obj)
    given_preemption = spec.get("preemption")
    preemption: dict[str, Any] = given_preemption if isinstance(given_preemption, dict) else {}
    rows: list[Row] = []
    for field, setting in (("withinClusterQueue", "within_cluster_queue"),
                           ("reclaimWithinCohort", "reclaim_within_cohort")):
        given = preemption.get(field)
        value = given if isinstance(given, str) and given else _PREEMPTION_DEFAULTS[field]
        rows.append(("cluster_queue", name, setting, value,
                     f"spec.preemption.{field}: {given}" if given else f"spec.preemption.{field} unset (default)"))
    borrow = preemption.get("borrowWithinCohort")
    if isinstance(borrow, dict):
        if isinstance(borrow.get("policy"), str):
            rows.append(("cluster_queue", name, "borrow_within_cohort", borrow["policy"],
                         f"spec.preemption.borrowWithinCohort.policy: {borrow['policy']}"))
        threshold = borrow.get("maxPriorityThreshold")
        if isinstance(threshold, int | float) and not isinstance(threshold, bool):
            rows.append(("cluster_queue", name, "borrow_max_priority", f"{threshold:g}",
                         f"spec.preemption.borrowWithinCohort.maxPriorityThreshold: {threshold}"))
    cohort = spec.get("cohortName", spec.get("cohort"))
    if isinstance(cohort, str) and cohort:
        rows.append(("cluster_queue", name, "cohort", cohort, f"spec.cohort: {cohort}"))
    strategy = spec.get("queueingStrategy")
    rows.append(("cluster_queue", name, "queueing_strategy", strategy if isinstance(strategy, str) and strategy
                 else "BestEffortFIFO", f"spec.queueingStrategy: {strategy}" if strategy else
                 "spec.queueingStrategy unset (default BestEffortFIFO)"))
    fair = spec.get("fairSharing")
    weight = fair.get("weight") if isinstance(fair, dict) else None
    if isinstance(weight, str | int | float) and not isinstance(weight, bool):
        rows.append(("cluster_queue", name, "fair_sharing_weight", str(weight), f"spec.fairSharing.weight: {weight}"))
    return rows


def kai_queue_rows(obj: Any) -> list[Row]:
    """One KAI Queue's minimum run times, priority and parent."""
    name = _name(obj)
    if name is None:
        return []
    spec = _spec(obj)
    rows: list[Row] = []
    for field, setting in (("preemptMinRuntime", "min_run_s"), ("reclaimMinRuntime", "reclaim_min_run_s")):
        seconds = go_duration_s(spec.get(field))
        if seconds is not None:
            rows.append(("queue", name, setting, f"{seconds:g}", f"spec.{field}: {spec[field]}"))
    priority = spec.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        rows.append(("queue", name, "priority", str(priority), f"spec.priority: {priority}"))
    parent = spec.get("parentQueue")
    if isinstance(parent, str) and parent:
        rows.append(("queue", name, "parent_queue", parent, f"spec.parentQueue: {parent}"))
    return rows


def kai_delay_rows(podgroups: list[Any]) -> list[Row]:
    """The preemption delay the KAI PodGroups carry: the most common of those set (the longer between equally
    common ones), and whether every PodGroup carries it; no row when none sets one. Counts are left out of the
    rows so that a snapshot is written when the setting changes, not whenever a PodGroup comes or goes."""
    delays: list[float] = []
    named = 0
    for obj in podgroups:
        if _name(obj) is None:
            continue
        named += 1
        seconds = go_duration_s(_spec(obj).get("preemptionDelay"))
        if seconds is not None and seconds > 0:
            delays.append(seconds)
    if not delays:
        return []
    counts: dict[float, int] = {}
    for seconds in delays:
        counts[seconds] = counts.get(seconds, 0) + 1
    common = max(counts, key=lambda v: (counts[v], v))
    every = counts[common] == named
    return [("cluster", "", "preemption_delay_s", f"{common:g}",
             f"spec.preemptionDelay {common:g} s (kai.scheduler/preemption-delay)"),
            ("cluster", "", "preemption_delay_on", "all" if every else "some",
             "every PodGroup listed" if every else "some PodGroups listed, not all")]


def policy_batch(cluster: str, scheduler: str, rows: list[Row], cursor: str | None) -> Batch | None:
    """The snapshot as a batch, or None when it is what the cursor says was stored last."""
    if not rows:
        return None
    digest = hashlib.sha256(json.dumps([scheduler, sorted(rows)]).encode()).hexdigest()
    if digest == cursor:
        return None
    now = datetime.now(UTC)
    frame = pl.DataFrame(
        {"cluster": [cluster] * len(rows), "valid_from": [now] * len(rows), "scheduler": [scheduler] * len(rows),
         "scope": [r[0] for r in rows], "subject": [r[1] for r in rows], "setting": [r[2] for r in rows],
         "value": [r[3] for r in rows], "raw": [r[4] for r in rows],
         "_record": [f"{r[0]} {r[1]} {r[2]}" for r in rows]},
        schema={"cluster": pl.String, "valid_from": pl.Datetime("us", "UTC"), "scheduler": pl.String,
                "scope": pl.String, "subject": pl.String, "setting": pl.String, "value": pl.String, "raw": pl.String,
                "_record": pl.String},
    )
    return Batch(source="kubernetes", frames={"scheduler_policy": frame},
                 watermarks=[Watermark("kubernetes", cluster, _STREAM, digest)])


def batches(collector: KubernetesCollector, cursor: str | None) -> Iterator[Batch]:
    """The policy the cluster's scheduler states, read with the collector's client and bounds. A list that
    cannot be read (Kueue or KAI absent, RBAC) only leaves that scheduler's rows out."""
    import kubernetes.client

    custom = kubernetes.client.CustomObjectsApi(collector.api_client)
    streams = {s.key.split("@")[0] for s in collector.streams}
    scheduler, rows = "", []
    if "workloads" in streams:
        found = _list(custom.list_cluster_custom_object, ("kueue.x-k8s.io", collector.kueue_version,
                                                          "clusterqueues"), collector)
        rows = [r for obj in found for r in cluster_queue_rows(obj)]
        scheduler = "kueue"
    if not rows and collector.read_kai_queues:
        found = _list(custom.list_cluster_custom_object, ("scheduling.run.ai", "v2", "queues"), collector)
        rows = [r for obj in found for r in kai_queue_rows(obj)]
        scheduler = "kai"
        if rows:
            podgroups = _list(custom.list_cluster_custom_object, ("scheduling.run.ai", "v2alpha2", "podgroups"),
                              collector)
            rows += kai_delay_rows(podgroups)
    batch = policy_batch(collector.cluster, scheduler, rows, cursor)
    if batch is not None:
        yield batch


def _list(call: Callable[..., Any], where: tuple[str, str, str], collector: KubernetesCollector) -> list[Any]:
    """Every object of a cluster-scoped custom resource, page by page, the whole read within READ_DEADLINE_S
    and MAX_READ_BYTES. A list that cannot be read, or not in time, is empty: that scheduler's rows are left
    out, and the collection goes on."""
    import kubernetes.client
    import urllib3

    listing = functools.partial(call, *where, limit=collector.watch.page_size,
                                _request_timeout=(collector.watch.idle_seconds, 60.0), _preload_content=False)
    found: list[Any] = []
    token: str | None = None
    read = 0
    deadline = outbound.Deadline(READ_DEADLINE_S, f"kubernetes: the {where[2]} policy read")
    try:
        for _ in range(10_000):
            resp = None
            try:
                with deadline.current():
                    resp = listing(_continue=token) if token else listing()
                body = outbound.read_capped(resp.stream(1 << 16), MAX_READ_BYTES - read, deadline)
            finally:
                if resp is not None:
                    resp.release_conn()
            read += len(body)
            page = json.loads(body)
            items = page.get("items") if isinstance(page, dict) else None
            found.extend(items if isinstance(items, list) else [])
            meta = page.get("metadata") if isinstance(page, dict) else None
            token = meta.get("continue") if isinstance(meta, dict) else None
            if not token or not isinstance(token, str):
                break
    except outbound.AnswerTooLarge:
        log.warning("kubernetes: no %s policy read from %s: larger than %s bytes", where[0], where[2],
                    f"{MAX_READ_BYTES:,}")
        return []
    except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        if deadline.expired:  # CallTimedOut, or its watchdog shut the socket: too slow, not never
            log.warning("kubernetes: no %s policy read from %s: not read whole within %g s", where[0], where[2],
                        READ_DEADLINE_S)
        else:
            log.info("kubernetes: no %s policy read from %s: %s", where[0], where[2], str(exc)[:200])
        return []
    finally:
        deadline.close()
    return found
