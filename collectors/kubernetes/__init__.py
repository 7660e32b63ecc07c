"""Kubernetes: preemption events, Kueue Workloads, GPU pods and KAI PodGroups.

Reads through the official `kubernetes` client, list-then-watch per resource
stream (watch), and turns what it reads into contract rows:

- streams `events` (core/v1) and `events.k8s.io` (events.k8s.io/v1) give
  `preemption_links` (events: kube-scheduler, Kueue, KAI, Volcano), each
  believed only from the component trusted with its kind
  (`kubernetes.reporters`) and recording it (`reporter`); an event of that
  shape from anyone else is quarantined;
- `workloads` (Kueue, `kueue.x-k8s.io/<kueue_version>`), `pods` and
  `podgroups` (KAI, `scheduling.run.ai/v2alpha2`) give `jobs` and `job_runs`
  (objects); the pods of KAI PodGroups give their PodGroup's runs and
  `job_aliases` (gangs).

A collection that reads Workloads lists Kueue's LocalQueues and
ClusterQueues first: an evicted Workload's pool is found through them once
Kueue has cleared its admission. A collection that reads jobs (streams
`workloads`, `pods` or `podgroups`) also lists nodes, ResourceFlavors and
ClusterQueues once, and KAI Queues when it reads pods or PodGroups, for the
GPU capacity of the pools those jobs are in (pools). These reads are
optional: one refused (RBAC 403) or absent (Kueue or KAI not installed)
narrows what they give, as a log line says, and fails nothing.

Job ids: the Workload's UID for Kueue (stable over its evictions and
re-admissions), "<namespace>/<name>" for a KAI PodGroup (what KAI's events
name a preemptor by), the pod's UID for a plain GPU pod. A preempted pod maps
to the job of its own UID, because that is all the event names and the
mapping must not depend on what else was read; a preemptor named only as
"<namespace>/<name>" (old kube-scheduler messages) is kept in that form, and
an unnamed one is NULL with the reason saying so.

Cursors: one watermark per (cluster, stream[@namespace]) holding the last
resourceVersion delivered, committed with the batch that contains its data;
bookmarks move it without data; stream `pools` holds the capacity written.
Two streams keep more in theirs, as JSON beside the resourceVersion: `pods`
the KAI PodGroups' recent pods (gangs), the events streams the recent KAI
gang evictions, so that one gang eviction, reported once per pod, stays one
link across collections. A record that cannot be read is quarantined (source
`kubernetes`, the stream and namespace/name, the field, the reason) and the
rest of the batch loads. The collection fails only when no stream could be
read at all.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import polars as pl

from preemptlens import outbound, private
from preemptlens.collectors.base import capacity_changes, known_pools, quota_changes
from preemptlens.collectors.kubernetes import policy, quotas
from preemptlens.collectors.kubernetes.corroborate import CLAIMED, Corroborator, Uncorroborated, Verdict, victim_kind
from preemptlens.collectors.kubernetes.events import (
    DEFAULT_REPORTERS,
    KAI,
    ParseError,
    Preemption,
    check_reporters,
    locate,
    preemptions,
)
from preemptlens.collectors.kubernetes.gangs import Gangs, dump_cursor, load_cursor
from preemptlens.collectors.kubernetes.objects import (
    KueueQueues,
    kai_member,
    parse_local_queue,
    pod_rows,
    podgroup_rows,
    workload_rows,
)
from preemptlens.collectors.kubernetes.pools import (
    KAI_QUOTA,
    NODES,
    QUOTA,
    KaiQueue,
    capacity,
    parse_cluster_queue,
    parse_flavor,
    parse_kai_queue,
    parse_node,
)
from preemptlens.config import (
    ClusterSettings,
    Config,
    Secret,
    http_url,
    number_argument,
    section,
    setting,
    text_argument,
)
from preemptlens.contract import Batch, Reject, Watermark, encodable
from preemptlens.errors import ConfigError, SourceError

# The Kubernetes client (which .watch imports too) is imported where it is used:
# load_config imports this module for every command, and only `collect kubernetes` needs the client.
if TYPE_CHECKING:
    import kubernetes.client

    from preemptlens.collectors.kubernetes.watch import Change, ListWatch, WatchBounds


log = logging.getLogger(__name__)

SOURCE = "kubernetes"
STREAMS = ("events", "events.k8s.io", "workloads", "pods", "podgroups")
# The streams whose jobs name a pool with a capacity to read.
POOLED_STREAMS = ("workloads", "pods", "podgroups")
# Raw JSON of a quarantined record is cut here: enough to find it, not a whole object dump.
RAW_LIMIT = 2000
# KAI reports a gang eviction once per pod, all in one scheduling cycle: reports of one PodGroup this close
# together are one eviction. A PodGroup evicted again must first be scheduled and started again.
KAI_GANG_WINDOW_S = 10.0
# How long the events streams remember a KAI gang eviction: longer than the API server keeps Events (one hour
# by default), so that a relist after a 410 Gone, which shows them again, adds no link.
KAI_GANG_MEMORY_S = 86400.0
BOOST_APIS = ("auto", "annotation")


@section("kubernetes", "The Kubernetes collector (`preemptlens collect kubernetes`).")
@dataclass(frozen=True)
class KubernetesSettings:
    api_url: str = setting(
        "",
        "API server URL, e.g. https://10.0.0.1:6443; empty: from the kubeconfig.",
        check=http_url,
    )
    kubeconfig: str = setting("", "Kubeconfig file; empty: api_url, else the in-cluster service account.")
    context: str = setting("", "Kubeconfig context to use; empty: its current context.")
    token: Secret | None = setting(None, "Bearer token for the API server (use {\"$env\" = ...} or {\"$file\" = ...}).")
    ca_file: str = setting("", "CA bundle that signed the API server's certificate; empty: system CAs.")
    verify_tls: bool = setting(True, "Verify the API server's TLS certificate.")
    namespaces: list[str] = setting([], "Namespaces to read; empty: all namespaces.")
    streams: list[str] = setting(["events"], f"Resource streams to read, any of: {', '.join(STREAMS)}.")
    kueue_version: str = setting(
        "v1beta1",
        "Kueue API version of Workloads (v1beta2 from Kueue 0.15).",
        choices=("v1beta1", "v1beta2"),
    )
    gpu_resource: str = setting("nvidia.com/gpu", "Extended resource name that counts GPUs.")
    watch_seconds: float = setting(30.0, "How long one collection watches each stream at most.", bounds=(1, 86_400))
    idle_seconds: float = setting(5.0, "Stop watching a stream after this long without any event.", bounds=(0.1, 3600))
    page_size: int = setting(500, "Objects per list page (`limit`).", bounds=(1, 10_000))
    batch_size: int = setting(1000, "Rows per loaded batch while watching.", bounds=(1, 1_000_000))
    max_retries: int = setting(5, "Retries of a dropped watch or a failing request before giving up.", bounds=(0, 100))
    reporters: dict[str, list[str]] = setting(
        DEFAULT_REPORTERS,
        "The components believed when an Event reports a preemption, per kind (kube-scheduler: the scheduler "
        "profile's schedulerName; kueue, kai, volcano): an event of that shape from any other writer is "
        "quarantined. Name each scheduler you run under another name; a kind left out keeps its default.",
        check=check_reporters,
    )
    kueue_boost_api: str = setting(
        "auto",
        "How the kueue_boost action checks where it writes a Workload's priority boost, the annotation "
        "kueue.x-k8s.io/priority-boost (read by Kueue v0.17.0 and later with the PriorityBoost feature gate; no "
        "release has a typed field): `auto` first reads the served Workload CRD and refuses a Kueue before 0.17, "
        "`annotation` writes it without reading the CRD.",
        choices=BOOST_APIS,
    )


SETTINGS = KubernetesSettings

_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "preemption_links": {
        "cluster": pl.String(), "victim_job_id": pl.String(), "time": pl.Datetime("us", "UTC"),
        "preemptor_job_id": pl.String(), "reason": pl.String(), "reporter": pl.String(),
        "corroboration": pl.String(), "victim_kind": pl.String(), "preemptor_queue": pl.String(),
        "preemptor_cohort": pl.String(), "preemptor_priority": pl.Int64(), "victim_priority": pl.Int64(),
        "victim_started": pl.Datetime("us", "UTC"),
    },
    "job_aliases": {"cluster": pl.String(), "alias": pl.String(), "job_id": pl.String()},
    "jobs": {
        "cluster": pl.String(), "job_id": pl.String(), "name": pl.String(), "team": pl.String(),
        "user_name": pl.String(), "priority_class": pl.String(), "priority_value": pl.Float64(),
        "tier": pl.String(), "preemptible": pl.Boolean(), "pool": pl.String(), "gpus": pl.Int32(),
        "submit_time": pl.Datetime("us", "UTC"),
    },
    "job_runs": {
        "cluster": pl.String(), "job_id": pl.String(), "run": pl.Int32(), "pool": pl.String(),
        "hosts": pl.String(), "gpus": pl.Int32(), "submit_time": pl.Datetime("us", "UTC"),
        "eligible_time": pl.Datetime("us", "UTC"), "start_time": pl.Datetime("us", "UTC"),
        "end_time": pl.Datetime("us", "UTC"), "state": pl.String(), "preemptor_job_id": pl.String(),
        "reason": pl.String(),
    },
    "pools": {
        "cluster": pl.String(), "pool": pl.String(), "valid_from": pl.Datetime("us", "UTC"), "gpus": pl.Int32(),
        "gpus_per_node": pl.Int32(),
    },
}

_T = TypeVar("_T")
Found = dict[str, list[dict[str, Any]]]


class Reader:
    """How one stream's objects become rows, and what it keeps between collections in its cursor."""

    def load(self, cursor: str | None) -> str | None:
        """The resourceVersion to resume from, with what the cursor kept."""
        return cursor

    def dump(self, resource_version: str | None) -> str | None:
        """The cursor to commit with a batch that ends at this resourceVersion."""
        return resource_version

    def listing(self) -> None:
        """A list begins."""

    def listed(self) -> None:
        """A list ended: every object the stream holds was shown since `listing`."""

    def rows(self, obj: Any, change: str) -> Found:
        raise NotImplementedError

    def flush(self) -> Found:
        """Rows made of what is kept, for the batch being committed (with their record locators)."""
        return {}


class EventReader(Reader):
    """Preemption links of one Events API; one link per KAI gang eviction (KAI_GANG_WINDOW_S)."""

    def __init__(self, api: str, reporters: Mapping[str, Collection[str]],
                 corroborate: Callable[[Preemption], Verdict] | None = None) -> None:
        self.api = api
        self.reporters = reporters
        # reads the victim back (corroborate); None: nothing is read, and every link goes in unverified
        self.corroborate = corroborate
        self.gang_evictions: dict[str, list[datetime]] = {}

    def load(self, cursor: str | None) -> str | None:
        rv, kept = _split_cursor(cursor, "kai")
        for victim, times in (kept if isinstance(kept, dict) else {}).items():
            try:
                kept_times = [datetime.fromisoformat(t) for t in times]
            except (TypeError, ValueError):
                continue
            # only what dump wrote (aware times) is kept: anything else just forgets a gang eviction
            self.gang_evictions[str(victim)] = [t for t in kept_times if t.tzinfo is not None]
        return rv

    def dump(self, resource_version: str | None) -> str | None:
        if resource_version is None or not self.gang_evictions:
            return resource_version
        newest = max(t for times in self.gang_evictions.values() for t in times)
        horizon = newest - timedelta(seconds=KAI_GANG_MEMORY_S)
        kept = {v: sorted(t.isoformat() for t in times if t >= horizon) for v, times in self.gang_evictions.items()}
        return json.dumps({"rv": resource_version, "kai": {v: t for v, t in sorted(kept.items()) if t}},
                          separators=(",", ":"))

    def rows(self, obj: Any, change: str) -> Found:
        # An Event's deletion is its TTL running out, not news about the preemption.
        if change == "DELETED":
            return {}
        found = preemptions(obj, self.api, self.reporters)
        if not found:
            return {}
        verdict = self.corroborate(found[0]) if self.corroborate is not None else Verdict(None, unread="not read")
        if verdict.contradiction is not None:
            victim = found[0].victim
            named = f"{victim.namespace}/{victim.name}" if victim is not None else found[0].victim_job_id
            raise Uncorroborated("corroboration", f"{CLAIMED} by the victim {victim_kind(found[0].kind)} {named}: "
                                 f"{verdict.contradiction}")
        links = []
        for p in found:
            if p.kind == KAI:
                seen = self.gang_evictions.setdefault(p.victim_job_id, [])
                if any(abs((p.time - t).total_seconds()) <= KAI_GANG_WINDOW_S for t in seen):
                    continue  # another pod of a gang eviction already linked
                seen.append(p.time)
            links.append({"victim_job_id": p.victim_job_id, "time": p.time, "preemptor_job_id": p.preemptor_job_id,
                          "reason": p.reason, "reporter": p.reporter, "corroboration": verdict.by,
                          "victim_kind": victim_kind(p.kind), "preemptor_queue": p.preemptor_queue,
                          "preemptor_cohort": p.preemptor_cohort, "preemptor_priority": p.preemptor_priority,
                          "victim_priority": p.victim_priority, "victim_started": verdict.started})
        return {"preemption_links": links}


class ObjectReader(Reader):
    def __init__(self, parse: Callable[[Any], Any]) -> None:
        self.parse = parse

    def rows(self, obj: Any, change: str) -> Found:
        # A deleted object's last state is its final one: keep it like any update.
        found = self.parse(obj)
        return {"jobs": found.jobs, "job_runs": found.runs}


class PodReader(Reader):
    """GPU pods: a plain pod is a job; a KAI PodGroup's pods make its job and runs (gangs), kept in the cursor."""

    def __init__(self, tiering: ClusterSettings, gpu_resource: str, namespace: str | None) -> None:
        self.tiering = tiering
        self.gpu_resource = gpu_resource
        self.namespace = namespace
        self.gangs = Gangs()
        self.alive: set[str] | None = None

    def load(self, cursor: str | None) -> str | None:
        rv, self.gangs = load_cursor(cursor)
        return rv

    def dump(self, resource_version: str | None) -> str | None:
        self.gangs.prune(datetime.now(UTC))
        return dump_cursor(resource_version, self.gangs)

    def listing(self) -> None:
        self.alive = set()

    def listed(self) -> None:
        if self.alive is not None:
            self.gangs.listed(self.alive, None if self.namespace is None else [self.namespace])
        self.alive = None

    def rows(self, obj: Any, change: str) -> Found:
        member = kai_member(obj, self.gpu_resource)
        if member is None:
            found = pod_rows(obj, self.tiering, self.gpu_resource)
            return {"jobs": found.jobs, "job_runs": found.runs}
        if self.alive is not None and change == "LISTED":
            self.alive.add(member.uid)
        self.gangs.observe(member)
        return {}

    def flush(self) -> Found:
        found: Found = {}
        for group, rows in self.gangs.rows(self.tiering):
            # a name holding half a surrogate pair is escaped in the locator, as locate does
            record = f"pods of PodGroup {group}".encode("utf-8", "backslashreplace").decode("utf-8")
            for table, table_rows in rows.items():
                found.setdefault(table, []).extend({**r, "_record": record} for r in table_rows)
        return found


def trusted_reporters(setting: Mapping[str, Collection[str]]) -> dict[str, frozenset[str]]:
    """`kubernetes.reporters` over the defaults: a kind the setting does not name keeps its default writers."""
    return {kind: frozenset(names) for kind, names in {**DEFAULT_REPORTERS, **setting}.items()}


def _split_cursor(cursor: str | None, key: str) -> tuple[str | None, Any]:
    """A cursor written as {"rv": ..., key: ...}, or a bare resourceVersion."""
    if not cursor or not cursor.startswith("{"):
        return cursor, None
    try:
        data = json.loads(cursor)
    except ValueError:
        return cursor, None
    if isinstance(data, dict) and isinstance(data.get("rv"), str):
        return data["rv"], data.get(key)
    return cursor, None


@dataclass(frozen=True)
class Stream:
    """One resource stream: what it reads and how its objects become rows."""

    key: str  # the watermark's stream name
    call: Callable[..., Any]
    reader: Reader
    target: str  # the table a record it cannot read is quarantined under


@dataclass
class _Pending:
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)

    def size(self) -> int:
        return sum(len(r) for r in self.rows.values()) + len(self.rejects)


@dataclass
class _Seen:
    """What a collection's batches held: where its data begins and the pools its jobs name."""

    start: datetime | None = None
    pools: set[str] = field(default_factory=set)

    def note(self, batch: Batch) -> None:
        for table, column in (("jobs", "submit_time"), ("job_runs", "submit_time"), ("preemption_links", "time")):
            frame = batch.frames.get(table)
            if frame is None:
                continue
            earliest = frame[column].min()
            if isinstance(earliest, datetime) and (self.start is None or earliest < self.start):
                self.start = earliest
            if "pool" in frame.columns:
                self.pools.update(p for p in frame["pool"].unique().to_list() if p is not None)


def _frame(table: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = {**_COLUMNS[table], "_record": pl.String()}
    return pl.DataFrame([{k: row.get(k) for k in schema} for row in rows], schema=schema, orient="row")


def _raw(obj: Any) -> str:
    shown = json.dumps(obj, default=str, sort_keys=True)
    return shown if len(shown) <= RAW_LIMIT else shown[: RAW_LIMIT - 3] + "..."


class KubernetesCollector:
    name: ClassVar[str] = SOURCE
    tables: ClassVar[tuple[str, ...]] = (
        "preemption_links", "jobs", "job_runs", "job_aliases", "pools", "scheduler_policy", "scheduler_quotas")

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        cluster: str,
        streams: list[str],
        namespaces: list[str],
        tiering: ClusterSettings,
        kueue_version: str = "v1beta1",
        watch: WatchBounds,
        gpu_resource: str = "nvidia.com/gpu",
        batch_size: int = 1000,
        reporters: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        unknown = [s for s in streams if s not in STREAMS]
        if unknown:
            raise ConfigError(f"kubernetes.streams: unknown {unknown}", f"choose from {', '.join(STREAMS)}")
        self.api_client = api_client
        self.cluster = cluster
        self.tiering = tiering
        self.kueue_version = kueue_version
        self.gpu_resource = gpu_resource
        self.watch = watch
        self.batch_size = batch_size
        self.reporters = trusted_reporters(reporters or {})
        self.corroborator = Corroborator(api_client, kueue_version)
        # KAI's queues are pools once its PodGroups are jobs: from PodGroups, or from their pods.
        self.read_kai_queues = "podgroups" in streams or "pods" in streams
        self.kueue_queues: KueueQueues | None = None
        self.scopes: list[str | None] = list(namespaces) if namespaces else [None]
        self.stream_names = list(streams)
        self.streams = [s for name in streams for s in self._streams(name, self.scopes)]
        self.read_capacity = any(name in POOLED_STREAMS for name in streams)

    # -- what each stream reads -------------------------------------------

    def _streams(self, name: str, namespaces: list[str | None]) -> Iterator[Stream]:
        import kubernetes.client

        core = kubernetes.client.CoreV1Api(self.api_client)
        events_v1 = kubernetes.client.EventsV1Api(self.api_client)
        custom = kubernetes.client.CustomObjectsApi(self.api_client)
        for ns in namespaces:
            key = name if ns is None else f"{name}@{ns}"
            call: Callable[..., Any]
            if name == "events":
                call = core.list_event_for_all_namespaces if ns is None else functools.partial(
                    core.list_namespaced_event, ns)
                yield Stream(key, call, EventReader("v1", self.reporters, self.corroborator), "preemption_links")
            elif name == "events.k8s.io":
                call = events_v1.list_event_for_all_namespaces if ns is None else functools.partial(
                    events_v1.list_namespaced_event, ns)
                yield Stream(key, call, EventReader("events.k8s.io/v1", self.reporters, self.corroborator),
                             "preemption_links")
            elif name == "pods":
                call = core.list_pod_for_all_namespaces if ns is None else functools.partial(
                    core.list_namespaced_pod, ns)
                yield Stream(key, call, PodReader(self.tiering, self.gpu_resource, ns), "jobs")
            elif name == "workloads":
                yield Stream(key, self._custom(custom, "kueue.x-k8s.io", self.kueue_version, "workloads", ns),
                             ObjectReader(self._workload), "jobs")
            else:
                yield Stream(key, self._custom(custom, "scheduling.run.ai", "v2alpha2", "podgroups", ns),
                             ObjectReader(lambda o: podgroup_rows(o, self.tiering, self.gpu_resource)), "jobs")

    @staticmethod
    def _custom(custom: Any, group: str, version: str, plural: str, ns: str | None) -> Callable[..., Any]:
        return (functools.partial(custom.list_cluster_custom_object, group, version, plural) if ns is None
                else functools.partial(custom.list_namespaced_custom_object, group, version, ns, plural))

    def _workload(self, obj: Any) -> Any:
        return workload_rows(obj, self.tiering, self.gpu_resource, self.kueue_queues)

    def _read_kueue_queues(self, rejects: list[Reject]) -> KueueQueues | None:
        """LocalQueues and ClusterQueues, for the pool of a Workload whose admission is gone (None: unreadable)."""
        import kubernetes.client

        custom = kubernetes.client.CustomObjectsApi(self.api_client)
        local: dict[tuple[str, str], str] = {}
        for ns in self.scopes:
            found, problem = self._list_once(
                "localqueues" if ns is None else f"localqueues@{ns}",
                self._custom(custom, "kueue.x-k8s.io", self.kueue_version, "localqueues", ns),
                parse_local_queue, rejects, "jobs")
            if found is None:
                log.info("%s: an evicted Workload's pool is its admission's only: cannot list LocalQueues (%s)",
                         SOURCE, problem)
                return None
            local.update(found)
        queues, problem = self._list_once(
            "clusterqueues", self._custom(custom, "kueue.x-k8s.io", self.kueue_version, "clusterqueues", None),
            lambda o: parse_cluster_queue(o, self.gpu_resource), rejects, "jobs")
        if queues is None:
            log.info("%s: an evicted Workload's pool is its ClusterQueue: cannot list ClusterQueues (%s)",
                     SOURCE, problem)
        return KueueQueues(local, {q.name: tuple(sorted(q.quotas)) for q in queues or []})

    # -- batches -------------------------------------------------------------

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        from preemptlens.collectors.kubernetes.watch import ListWatch

        failures: list[str] = []
        answered = 0
        seen = _Seen()
        for stream in self.streams:
            what = f"{SOURCE} {stream.key}"
            if stream.key.split("@")[0] == "workloads" and self.kueue_queues is None:
                queue_rejects: list[Reject] = []
                self.kueue_queues = self._read_kueue_queues(queue_rejects)
                if queue_rejects:
                    yield Batch(source=SOURCE, frames={}, rejects=queue_rejects, watermarks=[])
            watcher = ListWatch(what, stream.call, self.watch)
            try:
                for batch in self._collect(stream, watcher, watermarks.get((self.cluster, stream.key))):
                    seen.note(batch)
                    yield batch
            except SourceError as exc:
                # Batches already yielded are committed; the next run resumes this stream from them.
                failures.append(str(exc))
                log.warning("%s", exc)
            if watcher.answered:
                answered += 1
        if failures and not answered:
            raise SourceError(
                f"{SOURCE}: nothing could be read:\n  - " + "\n  - ".join(failures),
                "fix the first problem above and run again",
            )
        if self.read_capacity:
            yield self._pools_batch(watermarks.get((self.cluster, "pools")), seen,
                                    watermarks.get((self.cluster, "quotas")))
        # The preemption policy ClusterQueues or KAI Queues state (policy.py), for the replay.
        yield from policy.batches(self, watermarks.get((self.cluster, "policy")))

    def _collect(self, stream: Stream, watcher: ListWatch, since: str | None) -> Iterator[Batch]:
        from preemptlens.collectors.kubernetes.watch import BadLine, Change, Listing, Mark

        pending = _Pending()
        cursor = stream.reader.load(since)
        committed = cursor
        listing = False
        for item in watcher.run(cursor):
            if isinstance(item, Change):
                self._add(stream, item, pending)
                if item.resource_version is not None:
                    cursor = item.resource_version
            elif isinstance(item, Listing):
                listing = True
                stream.reader.listing()
            elif isinstance(item, Mark):
                cursor = item.resource_version
                if listing:
                    stream.reader.listed()
                    listing = False
            elif isinstance(item, BadLine):
                pending.rejects.append(Reject(stream.target, f"{SOURCE} {stream.key} watch line", "line",
                                              item.reason, item.line[:RAW_LIMIT]))
            if pending.size() >= self.batch_size or (isinstance(item, Mark) and cursor != committed):
                yield self._batch(stream, pending, cursor)
                pending, committed = _Pending(), cursor
        if pending.size() or cursor != committed:
            yield self._batch(stream, pending, cursor)
        else:
            # what is kept may have changed without a row (a KAI pod gone): commit it, at the same position
            tail = self._batch(stream, pending, cursor)
            if tail.frames:
                yield tail

    def _add(self, stream: Stream, item: Change, pending: _Pending) -> None:
        record = locate(item.object, stream.key)
        try:
            found = stream.reader.rows(item.object, item.type)
        except ParseError as exc:
            # an uncorroborated claim's reason opens with what it is (the Operations page counts it by that)
            reason = exc.reason if isinstance(exc, Uncorroborated) else f"{exc.field} {exc.reason}"
            pending.rejects.append(Reject(stream.target, record, exc.field, reason, _raw(item.object)))
            return
        broken = next((k for rows in found.values() for row in rows for k, v in row.items()
                       if isinstance(v, str) and not encodable(v)), None)
        if broken is not None:
            pending.rejects.append(Reject(stream.target, record, broken, f"{broken} holds text that is not valid "
                                          "Unicode (half a surrogate pair)", _raw(item.object)))
            return
        for table, rows in found.items():
            for row in rows:
                pending.rows.setdefault(table, []).append({**row, "cluster": self.cluster, "_record": record})

    # -- pool capacity -----------------------------------------------------

    def _list_once(self, what: str, call: Callable[..., Any], parse: Callable[[Any], _T],
                   rejects: list[Reject], target: str = "pools") -> tuple[list[_T] | None, str]:
        """Every object of a list, parsed (None and why when the list cannot be read)."""
        from preemptlens.collectors.kubernetes.watch import Change, ListWatch

        watcher = ListWatch(f"{SOURCE} {what}", call, self.watch.list_only())
        found: list[_T] = []
        try:
            for item in watcher.run(None):
                if not isinstance(item, Change):
                    continue
                try:
                    found.append(parse(item.object))
                except ParseError as exc:
                    rejects.append(Reject(target, locate(item.object, what), exc.field,
                                          f"{exc.field} {exc.reason}", _raw(item.object)))
        except SourceError as exc:
            return None, exc.message
        return found, ""

    def _pools_batch(self, cursor_text: str | None, seen: _Seen, quota_cursor_text: str | None = None) -> Batch:
        import kubernetes.client

        core = kubernetes.client.CoreV1Api(self.api_client)
        custom = kubernetes.client.CustomObjectsApi(self.api_client)

        def kueue(plural: str) -> Callable[..., Any]:
            return functools.partial(custom.list_cluster_custom_object, "kueue.x-k8s.io", self.kueue_version, plural)

        at = datetime.now(UTC).replace(microsecond=0)
        rejects: list[Reject] = []
        nodes, nodes_problem = self._list_once("nodes", core.list_node,
                                               lambda o: parse_node(o, self.gpu_resource), rejects)
        flavors, _ = self._list_once("resourceflavors", kueue("resourceflavors"), parse_flavor, rejects)
        # the objects listed for capacity also give the quotas and queues (scheduler_quotas)
        kept_queues = quotas.Keep(lambda o: parse_cluster_queue(o, self.gpu_resource))
        kept_kai = quotas.Keep(parse_kai_queue)
        queues, queues_problem = self._list_once("clusterqueues", kueue("clusterqueues"), kept_queues, rejects)
        kai_queues: list[KaiQueue] | None = None
        if self.read_kai_queues:
            kai_queues, kai_problem = self._list_once(
                "queues", functools.partial(custom.list_cluster_custom_object, "scheduling.run.ai", "v2", "queues"),
                kept_kai, rejects)
            if kai_queues is None:
                log.info("%s: KAI queue pools have no capacity: cannot list Queues (%s)", SOURCE, kai_problem)
            else:
                log.info("%s: KAI queue pool capacity from %s (%d queues)", SOURCE, KAI_QUOTA, len(kai_queues))
        found = capacity(nodes, flavors, queues, seen.pools | known_pools(cursor_text), kai_queues)
        if nodes is not None:
            log.info("%s: pool capacity from %s (%d nodes)", SOURCE, NODES, len(nodes))
        elif queues is not None:
            log.warning("%s: cannot list nodes (%s); pool capacity from ClusterQueues' %s instead",
                        SOURCE, nodes_problem, QUOTA)
        else:
            log.warning("%s: no pool capacity: cannot list nodes (%s) nor ClusterQueues (%s)",
                        SOURCE, nodes_problem, queues_problem)
        rows, cursor = capacity_changes(
            cursor_text, {pool: (c.gpus, c.per_node) for pool, c in found.items()}, seen.start or at, at)
        frames = {"pools": _frame("pools", [
            {"cluster": self.cluster, "pool": r.pool, "valid_from": r.valid_from, "gpus": r.gpus,
             "gpus_per_node": r.gpus_per_node, "_record": f"pool {r.pool} from {found[r.pool].source}"}
            for r in rows
        ])} if rows else {}
        marks = [Watermark(SOURCE, self.cluster, "pools", cursor)]
        if queues is not None or kai_queues is not None:
            quota_rows, quota_rejects = quotas.rows(kept_queues.objects, kept_kai.objects, self.gpu_resource)
            rejects += quota_rejects
            changed, quota_cursor = quota_changes(self.cluster, quota_cursor_text, quota_rows, at)
            if changed is not None:
                frames["scheduler_quotas"] = changed
            marks.append(Watermark(SOURCE, self.cluster, "quotas", quota_cursor))
        return Batch(source=SOURCE, frames=frames, rejects=rejects, watermarks=marks)

    def _batch(self, stream: Stream, pending: _Pending, cursor: str | None) -> Batch:
        for table, rows in stream.reader.flush().items():
            for row in rows:
                broken = next((k for k, v in row.items() if isinstance(v, str) and not encodable(v)), None)
                if broken is not None:
                    pending.rejects.append(Reject(stream.target, row["_record"], broken, f"{broken} holds text that "
                                                  "is not valid Unicode (half a surrogate pair)", None))
                else:
                    pending.rows.setdefault(table, []).append({**row, "cluster": self.cluster})
        frames = {table: _frame(table, rows) for table, rows in pending.rows.items() if rows}
        kept = stream.reader.dump(cursor)
        marks = [Watermark(SOURCE, self.cluster, stream.key, kept)] if kept is not None else []
        return Batch(source=SOURCE, frames=frames, rejects=pending.rejects, watermarks=marks)


# -- the command-line side ------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-url", type=text_argument(http_url), help="API server URL (overrides kubernetes.api_url)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (overrides kubernetes.kubeconfig)")
    parser.add_argument("--namespace", action="append", dest="namespaces",
                        help="namespace to read; repeat for several (overrides kubernetes.namespaces)")
    parser.add_argument("--stream", action="append", dest="streams", choices=STREAMS,
                        help="resource stream to read; repeat for several (overrides kubernetes.streams)")
    parser.add_argument("--watch-seconds", type=number_argument(float, 1, 86_400),
                        help="watch each stream at most this long")
    parser.add_argument("--idle-seconds", type=number_argument(float, 0.1, 3600),
                        help="stop a stream after this long without events")


def api_client(settings: KubernetesSettings, api_url: str | None = None, kubeconfig: str | None = None) -> (
    kubernetes.client.ApiClient
):
    import kubernetes.client
    import kubernetes.config

    cfg = kubernetes.client.Configuration()
    url = api_url or settings.api_url
    path = kubeconfig or settings.kubeconfig
    # A kubeconfig runs the programs its exec plugins name, and a CA bundle decides whom the collector believes:
    # neither may be a file another user can change.
    if path:
        private.refuse_if_others_can_change(path, "kubernetes.kubeconfig",
                                            "own it by the service user and chmod 600 it (docs/deploy.md)")
    if settings.ca_file:
        private.refuse_if_others_can_change(settings.ca_file, "kubernetes.ca_file",
                                            "own it by root or the service user, not writable by others")
    try:
        if path:
            kubernetes.config.load_kube_config(
                config_file=path, context=settings.context or None, client_configuration=cfg
            )
        elif not url:
            kubernetes.config.load_incluster_config(client_configuration=cfg)
    except (kubernetes.config.ConfigException, OSError) as exc:
        where = f"kubeconfig {path}" if path else "the in-cluster service account"
        raise ConfigError(
            f"kubernetes: cannot use {where}: {exc}",
            "set kubernetes.api_url (and kubernetes.token), or kubernetes.kubeconfig",
        ) from None
    if url:
        cfg.host = url.rstrip("/")
    token = settings.token
    if token is not None:
        cfg.api_key = {"authorization": token.reveal()}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    if settings.ca_file:
        cfg.ssl_ca_cert = settings.ca_file
    cfg.verify_ssl = settings.verify_tls
    client = kubernetes.client.ApiClient(cfg)
    # Its connections report their sockets to each call's deadline (preemptlens.outbound, collectors' watch).
    outbound.install(client.rest_client.pool_manager)
    return client


def cluster_name(config: Config, settings: KubernetesSettings, kubeconfig: str | None = None) -> str:
    """cluster.name, else the kubeconfig context this collection uses."""
    named = config.of(ClusterSettings).name
    if named:
        return named
    import kubernetes.config

    path = kubeconfig or settings.kubeconfig
    if settings.context:
        return settings.context
    if path:
        try:
            _, active = kubernetes.config.list_kube_config_contexts(config_file=path)
        except (kubernetes.config.ConfigException, OSError) as exc:
            raise ConfigError(f"kubernetes: cannot read kubeconfig {path}: {exc}", "set cluster.name") from None
        if active and active.get("name"):
            return str(active["name"])
    raise ConfigError(
        "kubernetes: cluster.name is not set and no kubeconfig context names the cluster",
        "set cluster.name (or kubernetes.context) to the name rows should carry",
    )


def watch_bounds(settings: KubernetesSettings, watch_seconds: float | None = None,
                 idle_seconds: float | None = None) -> WatchBounds:
    """The bounds of every list-then-watch the settings make, with the command line's watch and idle times
    where it gives them."""
    from preemptlens.collectors.kubernetes.watch import WatchBounds

    return WatchBounds(
        page_size=settings.page_size,
        watch_seconds=float(settings.watch_seconds if watch_seconds is None else watch_seconds),
        idle_seconds=float(settings.idle_seconds if idle_seconds is None else idle_seconds),
        max_retries=settings.max_retries,
    )


def build(args: argparse.Namespace, config: Config) -> KubernetesCollector:
    settings = config.of(KubernetesSettings)
    cluster = cluster_name(config, settings, getattr(args, "kubeconfig", None))
    return KubernetesCollector(
        api_client(settings, getattr(args, "api_url", None), getattr(args, "kubeconfig", None)),
        cluster=cluster,
        streams=getattr(args, "streams", None) or list(settings.streams),
        namespaces=getattr(args, "namespaces", None) or list(settings.namespaces),
        tiering=config.of(ClusterSettings),
        kueue_version=settings.kueue_version,
        watch=watch_bounds(settings, getattr(args, "watch_seconds", None), getattr(args, "idle_seconds", None)),
        gpu_resource=settings.gpu_resource,
        batch_size=settings.batch_size,
        reporters=settings.reporters,
    )
