"""The event and object parsers over recorded payloads, and over garbage (hypothesis)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from k8s_fake import cluster_queue, load_case, node, resource_flavor

from preemptlens.collectors.base import capacity_changes
from preemptlens.collectors.kubernetes.events import (
    ParseError,
    QueueSide,
    parse_kueue_preempted,
    parse_kueue_preempted_workload,
    parse_kueue_wait,
    parse_scheduler_message,
    preemptions,
    queue_side,
)
from preemptlens.collectors.kubernetes.objects import (
    CLUSTER_POOL,
    kai_member,
    pod_rows,
    podgroup_rows,
    quantity,
    workload_rows,
)
from preemptlens.collectors.kubernetes.pools import (
    Capacity,
    capacity,
    parse_cluster_queue,
    parse_flavor,
    parse_node,
)
from preemptlens.config import ClusterSettings
from preemptlens.warehouse import Warehouse

TIERING = ClusterSettings(
    tiers={"batch-low": "low", "inference-critical": "critical", "cq-prod": "high", "research-serve": "critical"},
    default_tier="normal",
    preemptible_tiers=["low", "normal"],
)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def by_victim(items: list[dict[str, Any]], api: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for item in items:
        for p in preemptions(item, api):
            found.setdefault(p.victim_job_id, []).append(p)
    return found


@pytest.mark.parametrize(
    ("message", "preemptor", "node"),
    [
        ("Preempted by ml/infer-0 on node gpu-1", "ml/infer-0", "gpu-1"),
        ("Preempted by a pod on node gpu-2", None, "gpu-2"),
        ("Preempted by pod 3f6b2c1d-1111-4222-8333-444455556666 on node gpu-3",
         "3f6b2c1d-1111-4222-8333-444455556666", "gpu-3"),
    ],
)
def test_kube_scheduler_message_formats(message: str, preemptor: str | None, node: str) -> None:
    assert parse_scheduler_message(message) == (preemptor, node)


def test_kube_scheduler_unknown_message_costs_only_the_preemptor() -> None:
    assert parse_scheduler_message("Preempted because the moon was full") == (None, None)
    event = copy.deepcopy(load_case("events_malformed.json")["items"][3])
    event["message"] = "Preempted because the moon was full"
    (link,) = preemptions(event, "v1")
    assert link.preemptor_job_id is None and "message not recognised" in link.reason


@pytest.mark.parametrize(
    ("why", "code"),
    [
        ("prioritization in the ClusterQueue", "InClusterQueue"),
        ("reclamation within the cohort", "InCohortReclamation"),
        ("Fair Sharing within the cohort", "InCohortFairSharing"),
        ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
    ],
)
def test_kueue_reasons(why: str, code: str) -> None:
    message = f"Preempted to accommodate a workload (UID: wl-foo, JobUID: job-foo) due to {why}; preemptor path: /a"
    parsed = parse_kueue_preempted(message)
    assert parsed is not None
    assert (parsed.preemptor_uid, parsed.preemptor_job_uid, parsed.reason) == ("wl-foo", "job-foo", code)


def test_kueue_preempted_workload_and_wait() -> None:
    assert parse_kueue_preempted_workload(
        "Preempted workload default/low (UID: low-uid) in ClusterQueue tas-main; preemptor effective priority: 3"
    ) == ("default/low", "low-uid", "tas-main")
    assert parse_kueue_wait("Quota reserved in ClusterQueue cq-a, wait time since queued was 42s") == 42.0
    assert parse_kueue_wait("Admitted by ClusterQueue cq-a, wait time since reservation was 0s") is None


def test_core_v1_case() -> None:
    found = by_victim(load_case("events_core_v1.json")["items"], "v1")
    # One link per preemption: Kueue's EvictedDueToPreempted / PreemptedWorkload / QuotaReserved,
    # Volcano's PodGroup Evict and the Scheduled event give none.
    assert sorted(found) == sorted([
        "7c1a9f0e-0000-4000-8000-00000000000a", "7c1a9f0e-0000-4000-8000-00000000000b",
        "7c1a9f0e-0000-4000-8000-00000000000c", "5a5a0000-bbbb-4ccc-8ddd-000000000001",
        "5a5a0000-bbbb-4ccc-8ddd-000000000002", "research/pg-train",
        "0b0b0000-2222-4333-8444-000000000001",
    ])
    (old,) = found["7c1a9f0e-0000-4000-8000-00000000000a"]
    assert (old.preemptor_job_id, old.time) == ("ml/infer-big-0", utc("2026-11-02T10:00:01"))
    (anon,) = found["7c1a9f0e-0000-4000-8000-00000000000b"]
    assert anon.preemptor_job_id is None and "preemptor not recorded" in anon.reason
    (by_uid,) = found["7c1a9f0e-0000-4000-8000-00000000000c"]
    assert by_uid.preemptor_job_id == "3f6b2c1d-1111-4222-8333-444455556666"
    assert by_uid.time == datetime(2026, 11, 2, 10, 10, 0, 123456, tzinfo=UTC)
    (kueue,) = found["5a5a0000-bbbb-4ccc-8ddd-000000000001"]
    assert kueue.preemptor_job_id == "9d1e0000-aaaa-4bbb-8ccc-000000000001"
    assert kueue.reason == "kueue InCohortReclaimWhileBorrowing"
    # Counted twice by the old recorder: same message, so the same preemptor at both times.
    twice = found["5a5a0000-bbbb-4ccc-8ddd-000000000002"]
    assert [(p.time, p.preemptor_job_id) for p in twice] == [
        (utc("2026-11-02T12:00:00"), "9d1e0000-aaaa-4bbb-8ccc-000000000002"),
        (utc("2026-11-02T12:30:00"), "9d1e0000-aaaa-4bbb-8ccc-000000000002"),
    ]
    # A KAI PodGroup is named "<namespace>/<name>", as KAI names the preemptor.
    (kai,) = found["research/pg-train"]
    assert (kai.preemptor_job_id, kai.reason) == ("research/pg-infer", "kai preempt")
    (volcano,) = found["0b0b0000-2222-4333-8444-000000000001"]
    assert volcano.preemptor_job_id is None and volcano.reason.startswith("volcano preempt")


def test_events_k8s_io_view_matches_core_view() -> None:
    core = by_victim(load_case("events_core_v1.json")["items"], "v1")
    new = by_victim(load_case("events_events_k8s_io_v1.json")["items"], "events.k8s.io/v1")
    # The same Event read through either API lands on the same natural key.
    assert new["7c1a9f0e-0000-4000-8000-00000000000c"] == core["7c1a9f0e-0000-4000-8000-00000000000c"]
    first, repeat = new["5a5a0000-bbbb-4ccc-8ddd-000000000003"]
    assert first.reason == "kueue InCohortFairSharing"
    assert first.preemptor_job_id == "9d1e0000-aaaa-4bbb-8ccc-000000000003"
    # A series' note is its first occurrence's: the repeat's preemptor is not known.
    assert repeat.time == datetime(2026, 11, 2, 15, 40, 0, 750000, tzinfo=UTC)
    assert repeat.preemptor_job_id is None and "preemptor not recorded" in repeat.reason


def test_malformed_events_name_the_field() -> None:
    items = load_case("events_malformed.json")["items"]
    outcomes: dict[str, str] = {}
    for item in items:
        try:
            outcomes[item["metadata"]["name"]] = f"{len(preemptions(item, 'v1'))} links"
        except ParseError as exc:
            outcomes[item["metadata"]["name"]] = exc.field
    assert outcomes == {
        "no-uid.1": "involvedObject.uid",
        "bad-time.1": "firstTimestamp",
        "odd-msg.1": "1 links",  # a message no release writes costs the preemptor, not the preemption
        "good.1": "1 links",
    }


def test_workloads_v1beta1() -> None:
    evicted, running, finished = load_case("workloads_v1beta1.json")["items"]
    rows = workload_rows(evicted, TIERING, "nvidia.com/gpu")
    (job,) = rows.jobs
    assert (job["job_id"], job["tier"], job["preemptible"], job["gpus"]) == (
        "5a5a0000-bbbb-4ccc-8ddd-000000000001", "low", True, 8)
    current, ended = rows.runs
    assert (current["run"], current["state"], current["submit_time"]) == (2, "pending", utc("2026-11-02T11:00:01"))
    assert ended["run"] == 1 and ended["state"] == "preempted"
    # Evicted at 11:00:00, the quota given back (Requeued) at 11:00:01: the run ends when the victim stopped.
    assert ended["end_time"] == utc("2026-11-02T11:00:01")
    # accumulatedPastExexcutionTimeSeconds (the v1beta1 spelling) = 9000 s of run 1, added up when Admitted
    # turned False (11:00:00).
    assert ended["start_time"] == utc("2026-11-02T08:30:00")
    assert ended["preemptor_job_id"] == "9d1e0000-aaaa-4bbb-8ccc-000000000001"
    assert ended["reason"] == "InCohortReclaimWhileBorrowing"

    rows = workload_rows(running, TIERING, "nvidia.com/gpu")
    assert rows.jobs[0]["gpus"] == 24 and rows.jobs[0]["pool"] == "h100" and rows.jobs[0]["tier"] == "normal"
    run, before = rows.runs
    assert (run["run"], run["state"], run["start_time"]) == (3, "running", utc("2026-11-02T12:40:02"))
    # Admitted again after its second eviction: Requeued (True, Preempted) and the "Previously: " message
    # still tell the run that ended, when it gave its quota back; its start is not said any more.
    assert (before["run"], before["state"], before["start_time"], before["end_time"]) == (
        2, "preempted", None, utc("2026-11-02T12:30:01"))

    rows = workload_rows(finished, TIERING, "nvidia.com/gpu")
    assert rows.jobs[0]["tier"] == "high"  # no PriorityClass: the ClusterQueue cq-prod names the tier
    (run,) = rows.runs
    assert (run["run"], run["state"], run["end_time"]) == (1, "completed", utc("2026-11-02T07:00:00"))


def test_an_accumulated_time_longer_than_the_workload_has_existed_starts_it_at_its_creation() -> None:
    """Some releases keep counting past the eviction (kueue #8065): a start before the object existed is
    never taken."""
    evicted = copy.deepcopy(load_case("workloads_v1beta1.json")["items"][0])
    evicted["status"]["accumulatedPastExexcutionTimeSeconds"] = 40 * 3600
    ended = workload_rows(evicted, TIERING, "nvidia.com/gpu").runs[1]
    assert ended["start_time"] == utc(evicted["metadata"]["creationTimestamp"].rstrip("Z"))


def test_workload_v1beta2_accumulated_time() -> None:
    (wl,) = load_case("workloads_v1beta2.json")["items"]
    ended = workload_rows(wl, TIERING, "nvidia.com/gpu").runs[1]
    assert ended["start_time"] == utc("2026-11-02T10:50:00")


def test_pods_and_podgroups() -> None:
    preempted, critical, cpu_only, kueue = load_case("pods.json")["items"]
    rows = pod_rows(preempted, TIERING, "nvidia.com/gpu")
    (run,) = rows.runs
    assert (run["state"], run["end_time"], run["hosts"]) == ("preempted", utc("2026-11-02T10:00:31"), "gpu-node-1")
    assert run["reason"].startswith("PreemptionByScheduler")
    rows = pod_rows(critical, TIERING, "nvidia.com/gpu")
    assert rows.jobs[0]["tier"] == "critical" and not rows.jobs[0]["preemptible"] and rows.runs[0]["state"] == "running"
    assert pod_rows(cpu_only, TIERING, "nvidia.com/gpu").jobs == []
    assert pod_rows(kueue, TIERING, "nvidia.com/gpu").jobs == []
    # A pod KAI schedules is in a PodGroup, which is its job (gangs), whether or not PodGroups are read.
    kai = copy.deepcopy(preempted)
    kai["metadata"].setdefault("annotations", {})["pod-group-name"] = "pg-train"
    assert pod_rows(kai, TIERING, "nvidia.com/gpu").jobs == []
    member = kai_member(kai, "nvidia.com/gpu")
    assert member is not None and (member.group, member.alias) == ("ml/pg-train", "ml/train-a-0")
    assert kai_member(preempted, "nvidia.com/gpu") is None
    _, infer = load_case("podgroups.json")["items"]
    assert podgroup_rows(infer, TIERING, "nvidia.com/gpu").jobs[0]["tier"] == "critical"
    assert podgroup_rows(infer, TIERING, "nvidia.com/gpu").jobs[0]["gpus"] == 8


@pytest.mark.parametrize(("value", "count"), [
    (4, 4), ("8", 8), (" 16 ", 16), ("1k", 1000), ("2Ki", 2048), ("1e3", 1000), ("1E3", 1000), ("2G", 2 * 10**9),
    ("+3", 3), ("2000m", 2), ("1.5k", 1500), ("0", 0), (".5k", 500), ("5.", 5),
])
def test_quantity_grammar_for_counts(value: Any, count: int) -> None:
    assert quantity(value, "q") == count


@pytest.mark.parametrize("value", ["500m", "1.5", "-1", "1e", "1KiB", "k", "", "1 k", "1e-1", "1e99", 1.0, True,
                                   None, "4Gi"])
def test_quantity_refuses_what_is_no_count(value: Any) -> None:
    with pytest.raises(ParseError) as caught:
        quantity(value, "status.allocatable.nvidia.com/gpu")
    assert caught.value.field == "status.allocatable.nvidia.com/gpu"


def test_quantity_exa_suffix_is_no_exponent() -> None:
    # "1E" is one exa (a suffix), "1E3" a thousand: too large for a count, not malformed.
    with pytest.raises(ParseError, match="out of range"):
        quantity("1E", "q")


ACCELERATOR = "cloud.google.com/gke-accelerator"
_NODES = [parse_node(n, "nvidia.com/gpu") for n in (
    node("h1", 8, {ACCELERATOR: "h100"}), node("h2", 8, {ACCELERATOR: "h100"}), node("l1", 2, {ACCELERATOR: "l4"}),
    node("c1", None))]
_FLAVORS = [parse_flavor(f) for f in (
    resource_flavor("default", None), resource_flavor("h100", {ACCELERATOR: "h100"}, "v1beta2"))]
_QUEUES = [parse_cluster_queue(q, "nvidia.com/gpu") for q in (
    cluster_queue("cq-a", {"h100": "12", "spot": "2"}), cluster_queue("cq-b", {"h100": "4"}, "v1beta2"))]


def test_capacity_sources() -> None:
    assert _QUEUES[0].quotas == {"h100": 12, "spot": 2}
    # Nodes: the GPU flavor's nodes, the rest in `cluster`; `default` (CPU only) is no pool; `spot` has
    # no ResourceFlavor object, so only its quota tells.
    assert capacity(_NODES, _FLAVORS, _QUEUES, set()) == {
        "h100": Capacity(16, 8, "node allocatable"), CLUSTER_POOL: Capacity(2, 2, "node allocatable"),
        "spot": Capacity(2, None, "Kueue nominalQuota"),
    }
    assert capacity(None, _FLAVORS, _QUEUES, {"cq-b"}) == {
        "h100": Capacity(16, None, "Kueue nominalQuota"), "spot": Capacity(2, None, "Kueue nominalQuota"),
        "cq-b": Capacity(4, None, "Kueue nominalQuota"),
    }
    # Without ClusterQueues, the flavors with node labels are taken for the GPU ones.
    assert capacity(_NODES, _FLAVORS, None, {"cq-b"}) == {
        "h100": Capacity(16, 8, "node allocatable"), CLUSTER_POOL: Capacity(2, 2, "node allocatable"),
    }
    assert capacity(_NODES, None, None, set()) == {CLUSTER_POOL: Capacity(18, 8, "node allocatable")}
    assert capacity(None, None, None, {"cq-b"}) == {}


def test_capacity_changes_backfill_and_quiet_repeats() -> None:
    day = datetime(2026, 11, 2, tzinfo=UTC)
    now: dict[str, tuple[int, int | None]] = {"h100": (16, 8), "empty": (0, None)}
    rows, cursor = capacity_changes(None, now, day, day.replace(hour=12))
    assert [(r.pool, r.valid_from, r.gpus) for r in rows] == [("h100", day, 16)]
    assert capacity_changes(cursor, now, day, day.replace(hour=13))[0] == []
    # Older data later: the first capacity reaches back to it. A quota read keeps the known node size.
    rows, cursor = capacity_changes(cursor, {"h100": (24, None)},
                                    day.replace(day=1), day.replace(hour=14))
    assert [(r.valid_from, r.gpus, r.gpus_per_node) for r in rows] == [
        (day.replace(day=1), 16, 8), (day.replace(hour=14), 24, 8)]


# -- garbage in: a ParseError naming a field, or rows; never another exception --

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)


def _mutations(base: Any) -> st.SearchStrategy[Any]:
    """The recorded object with one field replaced by junk, removed, or the text cut short."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append((*path, k))
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                paths.append((*path, i))
                walk(v, (*path, i))

    walk(base, ())

    def apply(path: tuple[Any, ...], junk: Any, remove: bool) -> Any:
        obj = copy.deepcopy(base)
        node = obj
        for step in path[:-1]:
            node = node[step]
        if remove and isinstance(node, dict):
            del node[path[-1]]
        else:
            node[path[-1]] = junk
        return obj

    def truncate(cut: int) -> Any:
        text = json.dumps(base)[:cut]
        try:
            return json.loads(text)
        except ValueError:
            return text

    return st.one_of(
        st.builds(apply, st.sampled_from(paths), _json, st.booleans()),
        st.builds(truncate, st.integers(0, len(json.dumps(base)))),
    )


def _check(call: Any, obj: Any) -> None:
    try:
        call(obj)
    except ParseError as exc:
        assert exc.field and exc.reason


_EVENTS = load_case("events_core_v1.json")["items"] + load_case("events_malformed.json")["items"]
_OBJECTS = load_case("workloads_v1beta1.json")["items"] + load_case("workloads_v1beta2.json")["items"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(_EVENTS))).flatmap(lambda i: _mutations(_EVENTS[i])), st.sampled_from(
    ["v1", "events.k8s.io/v1"]))
def test_events_never_crash(event: Any, api: str) -> None:
    _check(lambda obj: preemptions(obj, api), event)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(_OBJECTS))).flatmap(lambda i: _mutations(_OBJECTS[i])))
def test_workloads_never_crash(obj: Any) -> None:
    _check(lambda o: workload_rows(o, TIERING, "nvidia.com/gpu"), obj)


_PODS = load_case("pods.json")["items"] + load_case("podgroups.json")["items"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(_PODS))).flatmap(lambda i: _mutations(_PODS[i])))
def test_pods_never_crash(obj: Any) -> None:
    _check(lambda o: pod_rows(o, TIERING, "nvidia.com/gpu"), obj)
    _check(lambda o: kai_member(o, "nvidia.com/gpu"), obj)
    _check(lambda o: podgroup_rows(o, TIERING, "nvidia.com/gpu"), obj)


_CAPACITY = [node("h1", 8, {ACCELERATOR: "h100"}), resource_flavor("h100", {ACCELERATOR: "h100"}),
             cluster_queue("cq-a", {"h100": "12"}, "v1beta2")]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(_CAPACITY))).flatmap(lambda i: _mutations(_CAPACITY[i])))
def test_capacity_objects_never_crash(obj: Any) -> None:
    _check(lambda o: parse_node(o, "nvidia.com/gpu"), obj)
    _check(parse_flavor, obj)
    _check(lambda o: parse_cluster_queue(o, "nvidia.com/gpu"), obj)


def test_evicted_workload_keeps_the_pool_it_was_admitted_to(tmp_path: Path) -> None:
    # Kueue clears status.admission on eviction: the next listing of the Workload names no flavor.
    admitted = next(w for w in load_case("workloads_v1beta1.json")["items"] if w["metadata"]["name"] == "job-mid-1")
    evicted = copy.deepcopy(admitted)
    del evicted["status"]["admission"]
    wh = Warehouse(tmp_path / "wh.duckdb")
    try:
        pools = []
        for obj in (admitted, evicted):
            rows = workload_rows(obj, TIERING, "nvidia.com/gpu")
            pools.append(rows.jobs[0]["pool"])
            wh.load("jobs", pl.DataFrame([{**rows.jobs[0], "cluster": "k"}]), "kubernetes")
        stored = wh.query("select pool from jobs").to_series().to_list()
    finally:
        wh.close()
    assert pools[0] is not None and pools[1] is None
    assert stored == [pools[0]]


def test_kueue_paths_and_effective_priorities() -> None:
    # Kueue 0.15 on writes both sides' ClusterQueue paths (UNKNOWN when not known), 0.17 on the event adds the
    # effective priorities (pkg/scheduler/preemption/preemption.go, v0.19.2)
    head = "Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to reclamation within the cohort"
    parsed = parse_kueue_preempted(f"{head}; preemptor path: /r/c/q; preemptee path: UNKNOWN; preemptor effective "
                                   "priority: 1000 (base: 900, boost: 100); preemptee effective priority: -5 "
                                   "(base: 0, boost: -5)")
    assert parsed is not None
    assert (parsed.preemptor_path, parsed.preemptee_path) == ("/r/c/q", None)
    assert (parsed.preemptor_priority, parsed.preemptee_priority) == (1000, -5)
    assert queue_side(parsed.preemptor_path) == QueueSide("q", "/r/c")
    assert queue_side("/cq") == QueueSide("cq", None)  # a ClusterQueue in no cohort
    assert queue_side("UNKNOWN") == queue_side(None) == QueueSide(None, None)
    # a priority no int64 holds is not one Kueue wrote
    huge = parse_kueue_preempted(f"{head}; preemptor path: /q; preemptee path: /q; preemptor effective priority: "
                                 "9999999999999999999 (base: 0, boost: 0); preemptee effective priority: 1 "
                                 "(base: 1, boost: 0)")
    assert huge is not None and (huge.preemptor_priority, huge.preemptee_priority) == (None, 1)
    # a "Previously: " chain (kueue#6819) is read as the one preemption it keeps
    again = parse_kueue_preempted("Previously: " * 10 + f"{head}; preemptor path: /r/c/q; preemptee path: /r/q")
    assert again is not None and again.preemptor_uid == "wl-in" and again.preemptor_path == "/r/c/q"
