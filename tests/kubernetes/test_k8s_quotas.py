"""Quotas and queues from Kueue and KAI-Scheduler (scheduler_quotas, pool_structure), from recorded payloads.

tests/cases/kubernetes/quotas.json holds ClusterQueues and KAI Queues from the projects' docs and samples
(each item names its `_source`); the fake API server serves them to the real client, and the verdict's
adoption order reads what the scheduler is configured with from them.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
from k8s_fake import FakeApiServer, load_case, node
from test_k8s_collector import TOKEN, _collect, _config, _rows

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.kubernetes.quotas import cluster_queue_row, kai_queue_row
from preemptlens.warehouse import Warehouse

CASE = load_case("quotas.json")
CQ_V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
CQ_V1BETA2 = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
KAI_QUEUES = "/apis/scheduling.run.ai/v2/queues"
NODES = "/api/v1/nodes"


@pytest.fixture
def api(api: FakeApiServer) -> FakeApiServer:
    api.token = TOKEN
    return api


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["metadata"]["name"]: i for i in items}


def test_cluster_queue_quota_limit_and_cohort() -> None:
    v1, v2 = by_name(CASE["clusterqueues_v1beta1"]), by_name(CASE["clusterqueues_v1beta2"])
    # In a cohort without a borrowingLimit a queue may borrow all the cohort lends: its quota is no limit.
    assert cluster_queue_row(v1["team-a-cq"], "nvidia.com/gpu") == {
        "scheduler": "kueue", "kind": "cluster_queue", "name": "team-a-cq", "parent": "team-ab",
        "gpu_quota": 4.0, "gpu_limit": None}
    # A queue of CPU and memory only has no GPU quota at all (not a quota of 0).
    assert cluster_queue_row(v1["cluster-queue-1"], "nvidia.com/gpu")["gpu_quota"] is None
    # v1beta2 names the cohort cohortName; the limit is nominal plus borrowing over the flavors.
    assert cluster_queue_row(v2["team-b-cq"], "nvidia.com/gpu") == {
        "scheduler": "kueue", "kind": "cluster_queue", "name": "team-b-cq", "parent": "team-ab",
        "gpu_quota": 10.0, "gpu_limit": 14.0}


def test_kai_queue_quota_limit_and_parent() -> None:
    q = {name: kai_queue_row(obj) for name, obj in by_name(CASE["kai_queues"]).items()}
    assert q["research-team"] | {} == {"scheduler": "kai", "kind": "queue", "name": "research-team", "parent": None,
                                       "gpu_quota": 1.0, "gpu_limit": 2.0}
    # -1 is no bound; an unset limit is 0, as KAI reads it (no GPUs beyond the quota)
    assert (q["burst-queue"]["gpu_quota"], q["burst-queue"]["gpu_limit"]) == (0.0, None)
    assert (q["ml-team"]["parent"], q["ml-team"]["gpu_quota"], q["ml-team"]["gpu_limit"]) == ("research-team", 1.0,
                                                                                               0.0)
    assert q["default-queue"]["parent"] == "default-parent-queue"


def _serve(api: FakeApiServer, cluster_queues: list[dict[str, Any]], path: str = CQ_V1BETA1) -> None:
    api.add(NODES, *(node(f"gpu-{i}", 8, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}) for i in range(2)))
    api.add(path, *(copy.deepcopy(o) for o in cluster_queues))
    api.add(KAI_QUEUES, *(copy.deepcopy(o) for o in CASE["kai_queues"]))


def _structure(tmp_path: Path) -> dict[str, Any]:
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        analyze(wh, AnalyticsSettings())
        rows = wh.query("SELECT * FROM pool_structure").to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_collected_quotas_and_the_structure_they_give(api: FakeApiServer, tmp_path: Path) -> None:
    _serve(api, CASE["clusterqueues_v1beta1"])
    config = _config(tmp_path, api.url, ["podgroups"])
    assert _collect(tmp_path, config) == 0
    rows = {r["name"]: r for r in _rows(tmp_path, "SELECT * FROM scheduler_quotas")}
    assert set(rows) == {"team-a-cq", "cluster-queue-1", "default-parent-queue", "default-queue", "research-team",
                         "ml-team", "burst-queue"}
    assert {r["source"] for r in rows.values()} == {"kubernetes"}
    assert rows["team-a-cq"]["gpu_quota"] == 4 and rows["team-a-cq"]["parent"] == "team-ab"
    structure = _structure(tmp_path)
    # one ClusterQueue with a GPU quota, one KAI leaf with a GPU quota: no quota between teams yet;
    # three KAI leaf queues are pools of their own
    assert (structure["has_quotas"], structure["has_tiered_pools"]) == (False, True)
    assert "1 ClusterQueue(s) with a GPU quota in 1 cohort(s)" in structure["detail"]
    assert "3 KAI leaf queue(s), 1 with a GPU quota" in structure["detail"]
    # Collecting again changes nothing: no row is loaded, none is touched.
    before = _rows(tmp_path, "SELECT * FROM scheduler_quotas ORDER BY name")
    assert _collect(tmp_path, config) == 0
    assert _rows(tmp_path, "SELECT * FROM scheduler_quotas ORDER BY name") == before
    # A queue deleted from the scheduler is marked removed, and the structure no longer counts it.
    gone = by_name(CASE["kai_queues"])["burst-queue"]
    api.delete(KAI_QUEUES, copy.deepcopy(gone))
    assert _collect(tmp_path, config) == 0
    removed = {r["name"] for r in _rows(tmp_path, "SELECT name FROM scheduler_quotas WHERE removed")}
    assert removed == {"burst-queue"}
    assert "2 KAI leaf queue(s), 1 with a GPU quota" in _structure(tmp_path)["detail"]


def test_two_cluster_queues_with_gpu_quotas_are_quotas_and_pools(api: FakeApiServer, tmp_path: Path) -> None:
    _serve(api, CASE["clusterqueues_v1beta2"] + [
        {**copy.deepcopy(CASE["clusterqueues_v1beta2"][0]), "metadata": {"name": "team-c-cq", "uid": "cq-c"}}],
        CQ_V1BETA2)
    config = _config(tmp_path, api.url, ["podgroups"], kueue_version="v1beta2")
    assert _collect(tmp_path, config) == 0
    structure = _structure(tmp_path)
    assert structure["has_quotas"] is True and structure["has_tiered_pools"] is True
    assert "2 ClusterQueue(s) with a GPU quota in 1 cohort(s)" in structure["detail"]


def test_a_malformed_queue_is_rejected_by_name_and_field_and_the_rest_load(api: FakeApiServer,
                                                                            tmp_path: Path) -> None:
    bad = copy.deepcopy(CASE["clusterqueues_v1beta1"][0])
    bad["metadata"]["name"] = "broken"
    # Kueue accepts quantities; a borrowing limit that is no quantity cannot be one of them
    bad["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]["borrowingLimit"] = "lots"
    _serve(api, [*CASE["clusterqueues_v1beta1"], bad])
    assert _collect(tmp_path, _config(tmp_path, api.url, ["podgroups"])) == 0
    names = {r["name"] for r in _rows(tmp_path, "SELECT name FROM scheduler_quotas")}
    assert "team-a-cq" in names and "broken" not in names
    (reject,) = _rows(tmp_path, "SELECT * FROM quarantine WHERE target_table = 'scheduler_quotas'")
    assert "broken" in reject["record"] and reject["field"].endswith("borrowingLimit")
    assert not math.isnan(len(reject["reason"]))
