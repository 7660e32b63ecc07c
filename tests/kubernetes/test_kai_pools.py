"""KAI queue pools and overlapping Kueue flavors: the pools partition the GPUs, through the real client."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from k8s_fake import FakeApiServer, cluster_queue, kai_queue, load_case, node, resource_flavor
from test_k8s_collector import TOKEN, _collect, _config, _rows
from test_k8s_pools import ACCELERATOR, NODES, PODS, _kueue, _pools

from preemptlens.collectors.kubernetes.events import ParseError
from preemptlens.collectors.kubernetes.pools import KaiQueue, Node, capacity, parse_kai_queue

PODGROUPS = "/apis/scheduling.run.ai/v2alpha2/podgroups"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
# pg-train's creation, the earliest data of podgroups.json.
PODGROUPS_START = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def api(api: FakeApiServer) -> FakeApiServer:
    api.token = TOKEN
    return api


def _kai_cluster(api: FakeApiServer) -> None:
    """Four 8-GPU nodes and a CPU node, KAI without Kueue (its CRDs absent), the PodGroups of podgroups.json
    in leaf queues research-train and research-serve under parent `research`."""
    api.add(NODES, *(node(f"gpu-{i}", 8, {ACCELERATOR: "nvidia-h100-80gb"}) for i in range(4)), node("cpu-1", None))
    _, flavors, queues = _kueue("v1beta1")
    del api.resources[flavors], api.resources[queues]
    api.add(QUEUES,
            # The parent's 16 is what its children share: counted through them, not again.
            kai_queue("research", {"quota": 16, "limit": -1, "overQuotaWeight": 1}, children=["research-train",
                                                                                          "research-serve"]),
            kai_queue("research-train", {"quota": 8, "limit": 12, "overQuotaWeight": 2}, parent="research"),
            # Half a GPU guarantees no whole one.
            kai_queue("research-serve", {"quota": 4.5, "limit": -1, "overQuotaWeight": 1}, parent="research"),
            # The limit bounds an unlimited quota.
            kai_queue("capped", {"quota": -1, "limit": 2}),
            # No bound at all: no share of its own.
            kai_queue("burst", {"quota": -1, "limit": -1, "overQuotaWeight": 1}),
            # KAI's install default: nothing guaranteed.
            kai_queue("default-parent-queue", {"quota": 0, "limit": -1, "overQuotaWeight": 1},
                      children=["default-queue"]),
            kai_queue("default-queue", {"quota": 0, "limit": -1, "overQuotaWeight": 1}, parent="default-parent-queue"),
            kai_queue("cpu-only", None))
    api.add(PODGROUPS, *load_case("podgroups.json")["items"])


def test_kai_leaf_queues_hold_their_guarantee_carved_out_of_the_cluster_pool(
    api: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _kai_cluster(api)
    config = _config(tmp_path, api.url, ["podgroups"])
    with caplog.at_level(logging.INFO, logger="preemptlens.collectors.kubernetes"):
        assert _collect(tmp_path, config) == 0

    start = PODGROUPS_START
    pools = _pools(tmp_path)
    assert pools == [("capped", start, 2, 8), ("cluster", start, 32 - 8 - 4 - 2, 8),
                     ("research-serve", start, 4, 8), ("research-train", start, 8, 8)]
    # Readiness adds the pools up: they hold the nodes' 32 GPUs, once.
    assert sum(gpus for _, _, gpus, _ in pools) == 32
    jobs = {r["name"]: r["pool"] for r in _rows(tmp_path, "SELECT name, pool FROM jobs")}
    assert jobs == {"pg-train": "research-train", "pg-infer": "research-serve"}
    (line,) = [r.getMessage() for r in caplog.records if "KAI" in r.getMessage()]
    assert "KAI Queue quota" in line and "8 queues" in line

    (mark,) = _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'pools'")
    assert _collect(tmp_path, config) == 0
    assert _pools(tmp_path) == pools
    assert _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'pools'") == [mark]


def test_a_changed_kai_quota_moves_gpus_between_the_queue_and_the_cluster_pool(
    api: FakeApiServer, tmp_path: Path
) -> None:
    _kai_cluster(api)
    config = _config(tmp_path, api.url, ["podgroups"])
    assert _collect(tmp_path, config) == 0
    first = _pools(tmp_path)

    api.modify(QUEUES, kai_queue("research-train", {"quota": 12, "limit": 12}, parent="research"))
    assert _collect(tmp_path, config) == 0
    changed = [row for row in _pools(tmp_path) if row not in first]
    assert [(pool, gpus, per_node) for pool, _, gpus, per_node in changed] == [("cluster", 14, 8),
                                                                                ("research-train", 12, 8)]


def test_kai_queues_without_nodes_give_the_queue_pools_alone(api: FakeApiServer, tmp_path: Path) -> None:
    _kai_cluster(api)
    api.forbidden.add(NODES)
    assert _collect(tmp_path, _config(tmp_path, api.url, ["podgroups"])) == 0
    start = PODGROUPS_START
    assert _pools(tmp_path) == [("capped", start, 2, None), ("research-serve", start, 4, None),
                                ("research-train", start, 8, None)]


def test_queue_crd_absent_leaves_the_nodes_in_the_cluster_pool(
    api: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _kai_cluster(api)
    del api.resources[QUEUES]
    with caplog.at_level(logging.INFO, logger="preemptlens.collectors.kubernetes"):
        assert _collect(tmp_path, _config(tmp_path, api.url, ["podgroups"])) == 0

    assert _pools(tmp_path) == [("cluster", PODGROUPS_START, 32, 8)]
    assert len(_rows(tmp_path, "SELECT * FROM jobs")) == 2
    (line,) = [r.getMessage() for r in caplog.records if "KAI" in r.getMessage()]
    assert "cannot list Queues" in line and "404" in line


def test_a_kai_queue_reads_as_its_guarantee() -> None:
    assert parse_kai_queue(kai_queue("q", {"quota": 2.9, "limit": 8}, parent="p")) == KaiQueue("q", "p", 2)
    assert parse_kai_queue(kai_queue("q", {"quota": 8})) == KaiQueue("q", None, 0)  # unset limit: KAI caps at 0
    assert parse_kai_queue(kai_queue("q", {"quota": -1, "limit": -1})) == KaiQueue("q", None, None)
    assert parse_kai_queue(kai_queue("q", None)) == KaiQueue("q", None, 0)
    # -1 is KAI's only negative; the CRD declares a number.
    for bad in (-2, "8", True):
        with pytest.raises(ParseError) as exc:
            parse_kai_queue(kai_queue("q", {"quota": bad, "limit": -1}))
        assert exc.value.field == "spec.resources.gpu.quota"


def test_guarantees_beyond_the_nodes_leave_the_cluster_pool_empty_and_say_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kai = [KaiQueue("a", None, 6), KaiQueue("b", None, 6)]
    with caplog.at_level(logging.WARNING, logger="preemptlens.collectors.kubernetes.pools"):
        found = capacity([Node("gpu-1", {}, 8)], [], [], (), kai)
    assert {pool: c.gpus for pool, c in found.items()} == {"cluster": 0, "a": 6, "b": 6}
    (line,) = [r.getMessage() for r in caplog.records]
    assert "guaranteed 12 GPUs" in line and "hold 8" in line


def test_nodes_selected_by_two_flavors_count_in_the_most_specific_one(api: FakeApiServer, tmp_path: Path) -> None:
    _, flavors, queues = _kueue("v1beta1")
    h100, a100 = {ACCELERATOR: "nvidia-h100-80gb"}, {ACCELERATOR: "nvidia-a100-80gb"}
    spot = {**h100, "cloud.google.com/gke-spot": "true"}
    api.add(NODES, node("h100-1", 8, h100), node("h100-2", 8, h100), node("h100-spot-1", 8, spot),
            node("a100-1", 4, a100), node("a100-2", 4, a100), node("l4-1", 2, {ACCELERATOR: "nvidia-l4"}))
    # h100-spot's labels extend h100's: both select h100-spot-1. a100 and a100-reserved repeat the
    # same labels: the first by name takes the nodes.
    api.add(flavors, resource_flavor("default", None), resource_flavor("h100", h100),
            resource_flavor("h100-spot", spot), resource_flavor("a100-reserved", a100), resource_flavor("a100", a100))
    api.add(queues, cluster_queue("cq-a", {"h100": "16", "h100-spot": "8"}),
            cluster_queue("cq-prod", {"a100": "8"}), cluster_queue("cq-res", {"a100-reserved": "4"}))
    api.add(PODS, *load_case("pods.json")["items"])
    config = _config(tmp_path, api.url, ["pods"])
    assert _collect(tmp_path, config) == 0

    pools = [(pool, gpus, per_node) for pool, _, gpus, per_node in _pools(tmp_path)]
    # a100-reserved holds no node: a pool first seen empty gets no row.
    assert pools == [("a100", 8, 4), ("cluster", 2, 2), ("h100", 16, 8), ("h100-spot", 8, 8)]
    assert sum(gpus for _, gpus, _ in pools) == 8 * 3 + 4 * 2 + 2

    count = len(pools)
    (mark,) = _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'pools'")
    assert _collect(tmp_path, config) == 0
    assert len(_pools(tmp_path)) == count
    assert _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'pools'") == [mark]
