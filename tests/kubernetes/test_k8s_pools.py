"""Pool capacity from nodes, ResourceFlavors and ClusterQueues, through the real client."""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from k8s_fake import FakeApiServer, cluster_queue, load_case, node, resource_flavor
from test_k8s_collector import TOKEN, _collect, _config, _rows

from preemptlens.cli import main

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
EVENTS = "/api/v1/events"
ACCELERATOR = "cloud.google.com/gke-accelerator"


def _kueue(version: str) -> tuple[str, str, str]:
    base = f"/apis/kueue.x-k8s.io/{version}"
    return f"{base}/workloads", f"{base}/resourceflavors", f"{base}/clusterqueues"


@pytest.fixture
def api(api: FakeApiServer) -> FakeApiServer:
    api.token = TOKEN
    return api


def _cluster(api: FakeApiServer, version: str = "v1beta1") -> None:
    """Two H100 nodes and an A100 node behind flavors, an L4 node no flavor selects, a CPU node;
    ClusterQueues cq-a and cq-b share the H100 quota in a cohort, cq-prod holds the A100s."""
    _, flavors, queues = _kueue(version)
    api.add(NODES, node("h100-1", 8, {ACCELERATOR: "nvidia-h100-80gb"}), node("h100-2", 8, {ACCELERATOR:
            "nvidia-h100-80gb"}), node("a100-1", 4, {ACCELERATOR: "nvidia-a100-80gb"}),
            node("l4-1", 2, {ACCELERATOR: "nvidia-l4"}), node("cpu-1", None))
    # `default` is the CPU flavor: without node labels it selects every node, GPU ones included.
    api.add(flavors, resource_flavor("default", None, version),
            resource_flavor("h100", {ACCELERATOR: "nvidia-h100-80gb"}, version),
            resource_flavor("a100", {ACCELERATOR: "nvidia-a100-80gb"}, version))
    api.add(queues, cluster_queue("cq-a", {"h100": "12"}, version), cluster_queue("cq-b", {"h100": "4"}, version),
            cluster_queue("cq-prod", {"a100": "4"}, version))


def _pools(tmp_path: Path) -> list[tuple[str, datetime, int, int | None]]:
    rows = _rows(tmp_path, "SELECT pool, valid_from, gpus, gpus_per_node, source FROM pools ORDER BY pool, valid_from")
    assert {r["source"] for r in rows} <= {"kubernetes"}
    return [(r["pool"], r["valid_from"].astimezone(UTC), r["gpus"], r["gpus_per_node"]) for r in rows]


def test_capacity_per_flavor_from_nodes_and_plain_pods_in_the_cluster_pool(
    api: FakeApiServer, tmp_path: Path
) -> None:
    _cluster(api)
    workloads, _, _ = _kueue("v1beta1")
    api.add(workloads, *load_case("workloads_v1beta1.json")["items"])
    api.add(PODS, *load_case("pods.json")["items"])
    config = _config(tmp_path, api.url, ["workloads", "pods"])
    assert _collect(tmp_path, config) == 0

    # Valid from the earliest data read: job-mid-1's creation.
    start = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    assert _pools(tmp_path) == [("a100", start, 4, 4), ("cluster", start, 2, 2), ("h100", start, 16, 8)]
    jobs = {r["name"]: r["pool"] for r in _rows(tmp_path, "SELECT name, pool FROM jobs")}
    assert jobs["job-mid-1"] == "h100" and jobs["job-crit-9"] == "a100"
    assert jobs["train-a-0"] == jobs["infer-big-0"] == "cluster"
    pod_runs = _rows(tmp_path, "SELECT r.pool FROM job_runs r JOIN jobs j USING (cluster, job_id) "
                               "WHERE j.name IN ('train-a-0', 'infer-big-0')")
    assert [r["pool"] for r in pod_runs] == ["cluster", "cluster"]

    (mark,) = _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'pools'")
    assert _collect(tmp_path, config) == 0
    assert len(_pools(tmp_path)) == 3
    assert _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'pools'") == [mark]


def test_nodes_forbidden_falls_back_to_kueue_quotas(
    api: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _cluster(api, "v1beta2")
    workloads, _, _ = _kueue("v1beta2")
    api.add(workloads, *load_case("workloads_v1beta2.json")["items"])
    api.forbidden.add(NODES)
    config = _config(tmp_path, api.url, ["workloads"], kueue_version="v1beta2")
    with caplog.at_level(logging.INFO, logger="preemptlens.collectors.kubernetes"):
        assert _collect(tmp_path, config) == 0

    start = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    # The cohort's H100 quotas add up (12 + 4); node sizes and the node-only `cluster` pool are unknown.
    assert _pools(tmp_path) == [("a100", start, 4, None), ("h100", start, 16, None)]
    (line,) = [r.getMessage() for r in caplog.records if "pool capacity" in r.getMessage()]
    assert "cannot list nodes" in line and "403" in line and "nominalQuota" in line
    assert len(_rows(tmp_path, "SELECT * FROM jobs")) == 1


def test_a_capacity_change_writes_a_row_from_then_and_only_once(api: FakeApiServer, tmp_path: Path) -> None:
    _cluster(api)
    api.add(PODS, *load_case("pods.json")["items"])
    config = _config(tmp_path, api.url, ["pods"])
    assert _collect(tmp_path, config) == 0
    first = _pools(tmp_path)

    api.add(NODES, node("h100-3", 8, {ACCELERATOR: "nvidia-h100-80gb"}))
    api.delete(NODES, node("a100-1", 4, {ACCELERATOR: "nvidia-a100-80gb"}))
    before = datetime.now(UTC).replace(microsecond=0)
    assert _collect(tmp_path, config) == 0
    after = datetime.now(UTC)
    changed = [row for row in _pools(tmp_path) if row not in first]
    assert [(pool, gpus, per_node) for pool, _, gpus, per_node in changed] == [("a100", 0, 4), ("h100", 24, 8)]
    assert all(before <= valid_from <= after for _, valid_from, _, _ in changed)

    assert _collect(tmp_path, config) == 0
    assert len(_pools(tmp_path)) == len(first) + 2


def _pod(name: str, uid: str, gpus: int, created: str, started: str, priority: str) -> dict[str, Any]:
    pod = copy.deepcopy(load_case("pods.json")["items"][1])
    pod["metadata"].update(name=name, uid=uid, creationTimestamp=created)
    pod["spec"]["priorityClassName"] = priority
    pod["spec"]["nodeName"] = "gpu-1"
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    pod["status"]["startTime"] = started
    return pod


def test_analyze_uses_the_collected_capacity(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(NODES, node("gpu-1", 8))
    victim = _pod("train-low-0", "0a0a0000-0000-4000-8000-000000000001", 4, "2026-11-02T06:00:00Z",
                  "2026-11-02T06:00:10Z", "batch-low")
    victim["status"].update(phase="Failed", conditions=[{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod",
        "lastTransitionTime": "2026-11-02T09:00:01Z"}])
    victim["status"]["containerStatuses"] = [{"name": "main", "ready": False, "restartCount": 0, "image": "trainer:1",
                                              "imageID": "", "started": False, "state": {"terminated": {
                                                  "exitCode": 137, "reason": "Error",
                                                  "startedAt": "2026-11-02T06:00:10Z",
                                                  "finishedAt": "2026-11-02T09:00:31Z"}}}]
    preemptor = _pod("serve-0", "0b0b0000-0000-4000-8000-000000000002", 8, "2026-11-02T09:00:00Z",
                     "2026-11-02T09:00:40Z", "inference-critical")
    api.add(PODS, victim, preemptor)
    event = copy.deepcopy(load_case("events_core_v1.json")["items"][0])
    event["involvedObject"].update(name="train-low-0", uid=victim["metadata"]["uid"])
    event["message"] = f"Preempted by pod {preemptor['metadata']['uid']} on node gpu-1"
    event["firstTimestamp"] = event["lastTimestamp"] = "2026-11-02T09:00:01Z"
    api.add(EVENTS, event)
    config = _config(tmp_path, api.url, ["events", "pods"])
    assert _collect(tmp_path, config) == 0
    assert main(["--config", str(config), "--warehouse", str(tmp_path / "wh.duckdb"), "analyze"]) == 0

    (gain,) = _rows(tmp_path, "SELECT pool, need_gpus, victim_gpus, free_gpus, gain_s FROM preemption_gains")
    # 8 GPUs in the pool, 4 held by the victim: 4 free. Without a capacity the view takes the pool as full.
    assert (gain["pool"], gain["need_gpus"], gain["victim_gpus"], gain["free_gpus"]) == ("cluster", 8, 4, 4)
    assert gain["gain_s"] is not None
    (scarcity,) = _rows(tmp_path, "SELECT value FROM readiness_evidence WHERE measure = 'queue_pressure_hours_share'")
    assert scarcity["value"] is not None
