"""Cases the hostile-input property tests found in recorded payload shapes: each costs its object, named by
the field, and never escapes as an exception."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from preemptlens.collectors.kubernetes import EventReader, KubernetesCollector, ObjectReader, Stream, _Pending
from preemptlens.collectors.kubernetes.events import DEFAULT_REPORTERS
from preemptlens.collectors.kubernetes.objects import ACCUMULATED_FIELDS, podgroup_rows, workload_rows
from preemptlens.collectors.kubernetes.watch import Change
from preemptlens.config import ClusterSettings

CASES = Path(__file__).resolve().parents[1] / "cases" / "kubernetes"


def items(name: str) -> list[dict[str, Any]]:
    return list(json.loads((CASES / f"{name}.json").read_text())["items"])


def collect(parse: Any, objects: list[dict[str, Any]], events: bool = False) -> _Pending:
    kc = KubernetesCollector.__new__(KubernetesCollector)
    kc.cluster = "c1"
    kc.tiering = ClusterSettings(tiers={"prod": "critical"})
    kc.gpu_resource = "nvidia.com/gpu"
    pending = _Pending()
    reader = EventReader("v1", DEFAULT_REPORTERS) if events else ObjectReader(
        lambda o: parse(o, kc.tiering, kc.gpu_resource))
    where = Stream("objects", print, reader, "preemption_links" if events else "jobs")
    for obj in objects:
        kc._add(where, Change("LISTED", obj, "1"), pending)
    kc._batch(where, pending, "1")  # the frames build
    return pending


def evicted_once() -> tuple[dict[str, Any], str]:
    """A recorded Workload evicted once that reports its accumulated execution time."""
    for name in ("workloads_v1beta2", "workloads_v1beta1"):
        for obj in items(name):
            status = obj.get("status", {})
            key = next((k for k in ACCUMULATED_FIELDS if k in status), None)
            if key is not None:
                return copy.deepcopy(obj), key
    raise AssertionError("no recorded Workload reports its accumulated execution time")


def test_an_accumulated_time_reaching_before_year_one_costs_its_workload() -> None:
    obj, key = evicted_once()
    for condition in obj["status"].get("conditions", []):
        condition["lastTransitionTime"] = "0001-01-02T00:00:00Z"
    obj["status"][key] = 10 * 86400
    huge, _ = evicted_once()
    huge["status"][key] = 1e300
    pending = collect(workload_rows, [obj, huge])
    assert [r.field for r in pending.rejects] == [f"status.{key}", f"status.{key}"]


def test_half_a_surrogate_pair_costs_its_object_and_names_the_field() -> None:
    groups = items("podgroups")
    broken = copy.deepcopy(groups[0])
    broken["metadata"]["name"] = "\ud800"
    pending = collect(podgroup_rows, [broken, *groups[1:]])
    assert len(pending.rejects) == 1 and "half a surrogate pair" in pending.rejects[0].reason
    assert sum(len(rows) for rows in pending.rows.values()) > 0, "the other PodGroups still load"


def test_gpus_that_add_up_past_an_integer_cost_their_workload() -> None:
    workloads = items("workloads_v1beta2") + items("workloads_v1beta1")
    huge = copy.deepcopy(workloads[0])
    huge["spec"]["podSets"][0]["count"] = 1_793_606_400  # x 4 GPUs a pod: past 2**31 - 1
    pending = collect(workload_rows, [huge, *workloads[1:]])
    assert [r.field for r in pending.rejects] == ["spec.podSets[0].count"]
    assert "out of range" in pending.rejects[0].reason
    assert len(pending.rows["jobs"]) == len(workloads) - 1 > 0


def test_an_event_named_with_half_a_surrogate_pair_still_builds_its_batch() -> None:
    events = items("events_core_v1")
    broken = copy.deepcopy(events[0])
    broken["metadata"] = {"name": "\ud800", "resourceVersion": "1", "creationTimestamp": "2026-11-02T10:00:01Z"}
    pending = collect(None, [*events, broken], events=True)
    records = [row["_record"] for rows in pending.rows.values() for row in rows]
    assert records and all(isinstance(r, str) and r.encode("utf-8") for r in records)
