"""How the collector reads an event's victim back (collectors/kubernetes/corroborate.py), against the fake API
server through the real client: what it cannot read leaves the event unverified, never quarantined; what it
reads and finds silent quarantines it."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from k8s_fake import FakeApiServer

from preemptlens.collectors.kubernetes import KubernetesSettings, api_client
from preemptlens.collectors.kubernetes.corroborate import KAI_LAST_EVICTION, KAI_LAST_START, Corroborator, Verdict
from preemptlens.collectors.kubernetes.events import preemptions

PODS = "/api/v1/pods"
PODGROUPS = "/apis/scheduling.run.ai/v2alpha2/podgroups"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/workloads"


def _pod(uid: str, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "w-0", "namespace": "team-b", "uid": uid, "creationTimestamp": "2026-11-05T07:00:00Z"},
            "spec": {"containers": []}, "status": {"phase": "Running", "conditions": conditions}}


def _scheduler_event(uid: str) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "w-0.1", "namespace": "team-b", "creationTimestamp": "2026-11-05T10:00:00Z"},
            "eventTime": "2026-11-05T10:00:00.000000Z", "reportingController": "default-scheduler",
            "reason": "Preempted", "note": "Preempted by pod x on node n",
            "regarding": {"kind": "Pod", "namespace": "team-b", "name": "w-0", "uid": uid, "apiVersion": "v1"}}


def _kai_event(stamp: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "pg-a", "namespace": "team-b", "uid": "pg-uid",
                          "creationTimestamp": "2026-11-05T07:00:00Z",
                          "annotations": {} if stamp is None else {KAI_LAST_EVICTION: stamp}},
             "spec": {"queue": "q"}}
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": "pg-a.1", "namespace": "team-b", "creationTimestamp": "2026-11-05T10:00:00Z",
                          "annotations": {"evictor-action-type": "preempt"}},
             "reason": "Evict", "message": "Pod team-b/w-0 was preempted by higher priority workload team-a/pg-x",
             "reportingComponent": "kai-scheduler", "source": {"component": "kai-scheduler"},
             "firstTimestamp": "2026-11-05T10:00:00Z",
             "involvedObject": {"kind": "PodGroup", "namespace": "team-b", "name": "pg-a", "uid": "pg-uid",
                                "apiVersion": "scheduling.run.ai/v2alpha2"}}
    return group, event


def _judge(api: FakeApiServer, event: dict[str, Any], api_name: str = "events.k8s.io/v1") -> Verdict:
    client = api_client(KubernetesSettings(api_url=api.url, verify_tls=False))
    (first, *_) = preemptions(event, api_name)
    return Corroborator(client, "v1beta2")(first)


def test_a_pod_with_the_schedulers_condition_bears_the_event_out(api: FakeApiServer) -> None:
    api.add(PODS, _pod("u-1", [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]))
    assert _judge(api, _scheduler_event("u-1")) == Verdict("pod condition DisruptionTarget (PreemptionByScheduler)")


def test_a_pod_disrupted_for_another_reason_gainsays_it(api: FakeApiServer) -> None:
    # the taint manager's eviction is a DisruptionTarget too, but no preemption
    api.add(PODS, _pod("u-1", [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]))
    verdict = _judge(api, _scheduler_event("u-1"))
    assert verdict.by is None and verdict.contradiction and "no DisruptionTarget" in verdict.contradiction


def test_what_cannot_be_read_leaves_the_event_unverified(api: FakeApiServer) -> None:
    # gone (404), another object under the name (a new UID), a read RBAC refuses (403): never a contradiction
    api.add(PODS, _pod("u-other", []))
    replaced = _judge(api, _scheduler_event("u-1"))
    assert (replaced.by, replaced.contradiction) == (None, None) and "another object" in (replaced.unread or "")
    api.delete(PODS, _pod("u-other", []))
    gone = _judge(api, _scheduler_event("u-1"))
    assert (gone.by, gone.contradiction, gone.unread) == (None, None, "the pod is gone")
    api.add(PODS, _pod("u-1", []))
    api.forbidden.add(PODS)
    refused = _judge(api, _scheduler_event("u-1"))
    assert (refused.by, refused.contradiction) == (None, None) and "403" in (refused.unread or "")


def test_a_kai_podgroup_is_judged_by_its_last_eviction_stamp(api: FakeApiServer) -> None:
    group, event = _kai_event("2026-11-05T09:59:58Z")
    group["metadata"]["annotations"][KAI_LAST_START] = "2026-11-05T08:00:00Z"
    api.add(PODGROUPS, group)
    borne = _judge(api, event, "v1")
    assert borne.by == f"podgroup annotation {KAI_LAST_EVICTION}"
    # and the evicted attempt began when KAI allocated it; a start after the eviction is the next attempt's
    assert borne.started == datetime(2026, 11, 5, 8, 0, tzinfo=UTC)
    restarted = copy.deepcopy(group)
    restarted["metadata"]["annotations"][KAI_LAST_START] = "2026-11-05T10:03:00Z"
    api.modify(PODGROUPS, restarted)
    assert _judge(api, event, "v1").started is None
    # its last eviction long before the event: this eviction did not happen
    older = copy.deepcopy(group)
    older["metadata"]["annotations"][KAI_LAST_EVICTION] = "2026-11-05T06:00:00Z"
    api.modify(PODGROUPS, older)
    assert "before the event" in (_judge(api, event, "v1").contradiction or "")
    # KAI before v0.17.0 stamps nothing: unverified, not gainsaid
    api.modify(PODGROUPS, _kai_event(None)[0])
    unstamped = _judge(api, event, "v1")
    assert (unstamped.by, unstamped.contradiction) == (None, None) and "v0.17.0" in (unstamped.unread or "")


def test_a_workload_condition_without_a_time_still_bears_it_out(api: FakeApiServer) -> None:
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "wl", "namespace": "team-b", "uid": "wl-uid",
                             "creationTimestamp": "2026-11-05T07:00:00Z"},
                "status": {"conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted"}]}}
    api.add(WORKLOADS, workload)
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": "wl.1", "namespace": "team-b", "creationTimestamp": "2026-11-05T10:00:00Z"},
             "reason": "Preempted", "message": "Preempted to accommodate a workload (UID: a) in the ClusterQueue",
             "reportingComponent": "kueue-admission", "source": {"component": "kueue-admission"},
             "firstTimestamp": "2026-11-05T10:00:00Z",
             "involvedObject": {"kind": "Workload", "namespace": "team-b", "name": "wl", "uid": "wl-uid",
                                "apiVersion": "kueue.x-k8s.io/v1beta2"}}
    assert _judge(api, event, "v1").by == "workload condition Evicted (Preempted)"
