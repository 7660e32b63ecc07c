"""The checkpoint collector's `annotations` stream against the fake API server serving recorded objects.

The Workloads and Pods are the recorded payloads of tests/cases/kubernetes; a site's training jobs add an
annotation with their last checkpoint's time (and step) to them, under a key the site chooses
(`checkpoints.time_annotation`). A Workload's UID is its job; a Pod is found by its namespace/name as GPU
samples are. A value that is not a time, and an object no recorded job is, are quarantined; the rest loads.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
from k8s_fake import FakeApiServer, load_case

from preemptlens.collectors.checkpoints import CheckpointCollector
from preemptlens.config import Config, Secret
from preemptlens.warehouse import Warehouse

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/workloads"
PODS = "/api/v1/pods"
TIME_KEY = "ml.example.com/last-checkpoint-time"
STEP_KEY = "ml.example.com/last-checkpoint-step"
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _annotated(obj: dict, when: str, step: str | None = None) -> dict:
    obj = copy.deepcopy(obj)
    notes = obj["metadata"].setdefault("annotations", {}) or {}
    notes[TIME_KEY] = when
    if step is not None:
        notes[STEP_KEY] = step
    obj["metadata"]["annotations"] = notes
    return obj


def test_annotated_workloads_and_pods_give_checkpoints(api: FakeApiServer, tmp_path: Path) -> None:
    api.token = "t0ken"
    workloads = load_case("workloads_v1beta1.json")["items"]
    pods = load_case("pods.json")["items"]
    api.add(WORKLOADS, _annotated(workloads[0], "2026-11-02T09:20:00Z", "1200"),
            _annotated(workloads[1], "yesterday"), workloads[2])
    api.add(PODS, _annotated(pods[0], str((T0 + timedelta(minutes=25)).timestamp())), *pods[1:])
    wh = Warehouse(tmp_path / "w.duckdb")
    uid_low, uid_mid = workloads[0]["metadata"]["uid"], workloads[1]["metadata"]["uid"]
    jobs = pl.DataFrame({"cluster": ["c1"] * 3, "job_id": [uid_low, uid_mid, "pod-job"],
                         "team": ["team-a", "team-a", pods[0]["metadata"]["namespace"]],
                         "name": ["job-low-4f2a1", "job-mid-1", pods[0]["metadata"]["name"]],
                         "tier": ["low"] * 3, "preemptible": [True] * 3, "gpus": [1] * 3, "submit_time": [T0] * 3})
    wh.load("jobs", jobs, "kubernetes")
    runs = pl.DataFrame({"cluster": ["c1"] * 3, "job_id": [uid_low, uid_mid, "pod-job"], "run": [1] * 3,
                         "gpus": [1] * 3, "start_time": [T0] * 3, "state": ["running"] * 3})
    wh.load("job_runs", runs, "kubernetes")
    settings = {"kubernetes": {"api_url": api.url, "token": Secret("t0ken")},
                "checkpoints": {"streams": ["annotations"], "time_annotation": TIME_KEY, "step_annotation": STEP_KEY,
                                "annotation_objects": ["workloads", "pods"]}}
    collector = CheckpointCollector(Config(values=settings), "c1", ["annotations"])
    collector.use_runs(*wh.recorded_runs(T0))
    for batch in collector.batches(wh.watermarks(collector.name)):
        wh.load_batch(batch)
    rows = wh.query("SELECT job_id, run, time, step, origin FROM checkpoints ORDER BY time").rows()
    assert rows == [(uid_low, 1, T0 + timedelta(minutes=20), 1200.0, "annotation"),
                    ("pod-job", 1, T0 + timedelta(minutes=25), None, "annotation")]
    reasons = dict(wh.query("SELECT record, reason FROM quarantine").rows())
    assert "is not a time" in reasons["workloads team-a/job-mid-1"]
    wh.close()
