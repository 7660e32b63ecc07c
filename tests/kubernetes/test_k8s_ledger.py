"""Kubernetes identification through the ledger: the recorded object and event
shapes (tests/cases/kubernetes) parsed by the collector's own functions,
loaded through the load API, analysed for real.

- A Kueue Workload evicted twice within one minute by two preemptors, then
  admitted again and finished 30 s later: two preemptions, each with its own
  preemptor; the finished admission is none (it ended within the link
  tolerance of the second event).
- A KAI eviction with no PodGroup event: the pod's DisruptionTarget condition
  (KAI with --update-pod-eviction-condition) alone makes it a preemption, with
  an unknown preemptor; a pod KAI deleted without that condition ends then
  (cancelled), is no preemption, and does not stay `running` to the data's end.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
from k8s_fake import load_case

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.kubernetes.events import preemptions
from preemptlens.collectors.kubernetes.objects import pod_rows, workload_rows
from preemptlens.config import ClusterSettings
from preemptlens.warehouse import Warehouse

TIERING = ClusterSettings(tiers={"batch-low": "low", "inference-critical": "critical"}, default_tier="normal",
                           preemptible_tiers=["low", "normal"])
GPU = "nvidia.com/gpu"
T1 = datetime(2026, 11, 2, 11, 0, tzinfo=UTC)
X1 = "9d1e0000-aaaa-4bbb-8ccc-000000000001"
X2 = "9d1e0000-aaaa-4bbb-8ccc-0000000000x2"


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _cond(kind: str, status: str, reason: str, at: datetime, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": _iso(at)}


def _preempted_by(uid: str) -> str:
    return f"Preempted to accommodate a workload (UID: {uid}) due to prioritization in the ClusterQueue"


def _workload_history() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Workload as a watch delivers it over the minute, and Kueue's two Preempted events."""
    first = load_case("workloads_v1beta1.json")["items"][0]  # evicted once at T1 (run 1 started 08:30)
    admitted = copy.deepcopy(first)
    admitted["status"]["conditions"] = [
        _cond("QuotaReserved", "True", "QuotaReserved", T1 + timedelta(seconds=10)),
        _cond("Admitted", "True", "Admitted", T1 + timedelta(seconds=10)),
        _cond("Evicted", "False", "Preempted", T1 + timedelta(seconds=10)),
    ]
    second = copy.deepcopy(first)
    at = T1 + timedelta(seconds=50)
    second["status"]["conditions"] = [
        _cond("Evicted", "True", "Preempted", at, _preempted_by(X2)),
        _cond("Preempted", "True", "InClusterQueue", at, _preempted_by(X2)),
        _cond("Requeued", "True", "Preempted", at + timedelta(seconds=1)),
        _cond("Admitted", "False", "NoReservation", at),
    ]
    second["status"]["schedulingStats"]["evictions"][0]["count"] = 2
    second["status"]["accumulatedPastExexcutionTimeSeconds"] = 9040
    finished = copy.deepcopy(second)
    finished["status"]["conditions"] = [
        _cond("Admitted", "True", "Admitted", T1 + timedelta(seconds=60)),
        _cond("Evicted", "False", "Preempted", T1 + timedelta(seconds=60)),
        _cond("Finished", "True", "Succeeded", T1 + timedelta(seconds=90)),
    ]
    event = next(e for e in load_case("events_core_v1.json")["items"]
                 if e["reason"] == "Preempted" and e["involvedObject"]["kind"] == "Workload")
    again = copy.deepcopy(event)
    again["metadata"]["name"] += "x"
    again["eventTime"] = _iso(at + timedelta(milliseconds=500))
    again["message"] = _preempted_by(X2)
    return [first, admitted, second, finished], [event, again]


def _ledger(tmp_path: Path, objects: list[tuple[Any, Any]], events: list[dict[str, Any]]) -> Warehouse:
    wh = Warehouse(tmp_path / "w.duckdb")
    for parse, obj in objects:
        rows = parse(obj, TIERING, GPU)
        wh.load("jobs", pl.DataFrame([{**j, "cluster": "k"} for j in rows.jobs]), "kubernetes")
        wh.load("job_runs", pl.DataFrame([{**r, "cluster": "k"} for r in rows.runs], infer_schema_length=None),
                "kubernetes")
    links = [{"cluster": "k", "victim_job_id": p.victim_job_id, "time": p.time, "preemptor_job_id": p.preemptor_job_id,
              "reason": p.reason} for e in events for p in preemptions(e, "v1")]
    if links:
        wh.load("preemption_links", pl.DataFrame(links), "kubernetes")
    analyze(wh, AnalyticsSettings())
    return wh


def test_workload_evicted_twice_in_one_minute(tmp_path: Path) -> None:
    snapshots, events = _workload_history()
    with _ledger(tmp_path, [(workload_rows, s) for s in snapshots], events) as wh:
        runs = wh.query("SELECT run, state, start_time, end_time FROM job_runs ORDER BY run").rows()
        assert [(r, s) for r, s, _, _ in runs] == [(1, "preempted"), (2, "preempted"), (3, "completed")]
        # run 2's start came from the admitted snapshot and survived the eviction's less complete view
        assert runs[1][2] == T1 + timedelta(seconds=10)
        ledger = wh.query("SELECT victim_run, preemptor_job_id, reason, requeue_delay_s, prior_job_preemptions "
                          "FROM preemption_ledger ORDER BY victim_run").rows()
    # Each eviction's condition time is whole seconds; its Preempted event, 0.5 s later in that second, is
    # when it happened (the ledger takes a link's time within the run's last second).
    assert ledger == [(1, X1, "InCohortReclaimWhileBorrowing", 9.5, 0), (2, X2, "InClusterQueue", 9.5, 1)]


def test_workload_seen_only_after_its_second_eviction(tmp_path: Path) -> None:
    """A collector that starts late lists the Workload once: run 2 has no start, so it cannot be
    costed, but neither event may fall on the finished run 3."""
    snapshots, events = _workload_history()
    with _ledger(tmp_path, [(workload_rows, snapshots[2]), (workload_rows, snapshots[3])], events) as wh:
        assert wh.query("SELECT count(*) AS n FROM preemption_ledger")["n"][0] == 0


def _kai_pod(name: str, uid: str) -> dict[str, Any]:
    pod = copy.deepcopy(load_case("pods.json")["items"][0])
    pod["metadata"].update(name=name, uid=uid)
    pod["metadata"]["annotations"] = {"pod-group-name": f"pg-{name}"}
    pod["spec"]["schedulerName"] = "kai-scheduler"
    return pod


def test_kai_eviction_without_a_podgroup_event(tmp_path: Path) -> None:
    marked = _kai_pod("marked", "7c1a9f0e-0000-4000-8000-0000000000a1")
    marked["status"]["conditions"][0]["message"] = "Eviction by kai-scheduler: preempt"
    silent = _kai_pod("silent", "7c1a9f0e-0000-4000-8000-0000000000a2")
    silent["status"]["phase"] = "Running"
    silent["status"]["conditions"] = []
    silent["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-11-02T09:00:10Z"}}
    silent["metadata"]["deletionTimestamp"] = "2026-11-02T10:00:30Z"
    later = load_case("pods.json")["items"][1]  # a run that goes on after both, so the data ends later
    with _ledger(tmp_path, [(pod_rows, marked), (pod_rows, silent), (pod_rows, later)], []) as wh:
        runs = dict(wh.query("SELECT job_id, state FROM job_runs").rows())
        ended = wh.query("SELECT end_time FROM job_runs WHERE job_id = $j", {"j": silent["metadata"]["uid"]})
        ledger = wh.query("SELECT victim_job_id, preemptor_known FROM preemption_ledger").rows()
    assert runs[silent["metadata"]["uid"]] == "cancelled"
    assert ended["end_time"][0] == datetime(2026, 11, 2, 10, 0, 30, tzinfo=UTC)
    assert ledger == [(marked["metadata"]["uid"], False)]
