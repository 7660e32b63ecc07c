"""Kubernetes events and objects (Pods, Kueue Workloads, KAI PodGroups) against hostile values, in
the recorded payload shapes: the collector's own per-object path (parse, or quarantine on
ParseError) never raises anything else, and its batch frames build and pass the contract checks."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_values import HOSTILE, mutated
from hypothesis import given
from hypothesis import strategies as st

from preemptlens.collectors.kubernetes import (
    EventReader,
    KubernetesCollector,
    ObjectReader,
    PodReader,
    Reader,
    Stream,
    _Pending,
)
from preemptlens.collectors.kubernetes.events import DEFAULT_REPORTERS
from preemptlens.collectors.kubernetes.objects import podgroup_rows, workload_rows
from preemptlens.collectors.kubernetes.watch import Change
from preemptlens.config import ClusterSettings
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.hostile

CASES = Path(__file__).resolve().parents[1] / "cases" / "kubernetes"
PAYLOADS = {
    name: json.loads((CASES / f"{name}.json").read_text())["items"]
    for name in ("events_core_v1", "events_events_k8s_io_v1", "pods", "workloads_v1beta1", "workloads_v1beta2",
                 "podgroups")
}


def collector() -> KubernetesCollector:
    # Only what the per-object path reads; the API client and the streams are not needed here.
    kc = KubernetesCollector.__new__(KubernetesCollector)
    kc.cluster = "c1"
    kc.tiering = ClusterSettings(tiers={"prod": "critical"})
    kc.gpu_resource = "nvidia.com/gpu"
    return kc


@pytest.fixture(scope="module")
def warehouse() -> Iterator[Warehouse]:
    with Warehouse(":memory:") as wh:
        yield wh


def stream(kc: KubernetesCollector, name: str) -> Stream:
    reader: Reader
    if name.startswith("events"):
        reader = EventReader("v1" if name == "events_core_v1" else "events.k8s.io/v1", DEFAULT_REPORTERS)
        return Stream(name, print, reader, "preemption_links")
    if name == "pods":
        reader = PodReader(kc.tiering, kc.gpu_resource, None)
    else:
        parse: Any = podgroup_rows if name == "podgroups" else workload_rows
        reader = ObjectReader(functools.partial(lambda p, o: p(o, kc.tiering, kc.gpu_resource), parse))
    return Stream(name, print, reader, "jobs")


@HOSTILE
@given(data=st.data(), name=st.sampled_from(sorted(PAYLOADS)))
def test_objects_and_events(warehouse: Warehouse, name: str, data: st.DataObject) -> None:
    kc = collector()
    objects = [data.draw(mutated(obj, most=5)) for obj in
               data.draw(st.lists(st.sampled_from(PAYLOADS[name]), min_size=1, max_size=3))]
    pending = _Pending()
    where = stream(kc, name)
    for obj in objects:
        kc._add(where, Change(data.draw(st.sampled_from(["LISTED", "ADDED", "MODIFIED"])), obj, "1"), pending)
    assert len(pending.rejects) <= len(objects)
    batch = kc._batch(where, pending, "1")
    if data.draw(st.integers(0, 19)) == 0:
        for table, frame in batch.frames.items():
            good, bad = warehouse._validate(table, frame, batch.source)
            assert good.height + len(bad) <= frame.height
