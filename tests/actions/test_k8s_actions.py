"""The Kubernetes effectors through `preemptlens act` against the fake API server holding recorded Workloads
and PodGroups: exactly the merge patches expected in enforce mode, none in dry-run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from actions_world import H, World, kueue_boost, minutes, section
from k8s_fake import CRDS, MERGE_PATCH, FakeApiServer, Patch, load_case, serve_workload_crd

from preemptlens.analytics.whatif import snippets
from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/workloads"
PODGROUPS = "/apis/scheduling.run.ai/v2alpha2/podgroups"
LOW = "5a5a0000-bbbb-4ccc-8ddd-000000000001"  # team-a/job-low-4f2a1
MID = "5a5a0000-bbbb-4ccc-8ddd-000000000002"  # team-a/job-mid-1
TRAIN = "research/pg-train"  # a KAI PodGroup's job id
INFER = "research/pg-infer"


def _setup(tmp_path: Path, api: FakeApiServer, section: str, costs: dict[str, tuple[float | None, float | None]],
           kueue: str = "0.19") -> Path:
    api.add(WORKLOADS, *load_case("workloads_v1beta1.json")["items"])
    api.add(PODGROUPS, *load_case("podgroups.json")["items"])
    serve_workload_crd(api, kueue)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        world = World(wh)
        for job, (cost, near) in costs.items():
            world.job(job)
            world.cost(job, minutes(0), cost, near)
    config = tmp_path / "preemptlens.toml"
    config.write_text(f'[warehouse]\npath = "{tmp_path / "w.duckdb"}"\n[cluster]\nname = "c1"\n'
                      f'[kubernetes]\napi_url = "{api.url}"\n{section}')
    return config


def kai_protect(**values: bool | int | float | str) -> str:
    """[kai_protect] in enforce mode protecting a job 90% done, with no pool-share cap so the one recorded
    PodGroup can be protected; `values` add keys."""
    return section("kai_protect", enabled=True, mode="enforce", near_completion_high=0.9, max_pool_share=1.0,
                   **values)


def _act(config: Path, at: float) -> int:
    return main(["--config", str(config), "act", "--now", minutes(at).isoformat()])


def _rows(tmp_path: Path) -> list[dict[str, Any]]:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        return list(wh.query("SELECT * FROM actions ORDER BY id").iter_rows(named=True))


def _set(tmp_path: Path, job: str, at: float, cost: float | None, near: float | None = None) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        World(wh).cost(job, minutes(at), cost, near)


def test_kueue_enforce_sends_exactly_the_boost_and_its_removal(tmp_path: Path, api: FakeApiServer) -> None:
    config = _setup(tmp_path, api, kueue_boost("enforce"), {LOW: (9 * H, None), MID: (2 * H, None)})
    assert _act(config, 0) == 0
    path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads/job-low-4f2a1"
    assert api.patches == [Patch(path, MERGE_PATCH, {"metadata": {
        "labels": {"preemptlens.io/action": "kueue_boost"},
        "annotations": {"kueue.x-k8s.io/priority-boost": "100"}}})]
    stored = api.get(WORKLOADS, "team-a", "job-low-4f2a1")
    assert stored is not None
    assert stored["metadata"]["annotations"] == {"kueue.x-k8s.io/priority-boost": "100"}
    # The recorded label stays beside the mark.
    assert stored["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "0a0a0000-1111-4222-8333-00000000j0b1",
                                            "preemptlens.io/action": "kueue_boost"}
    [row] = _rows(tmp_path)
    assert (row["mode"], row["level"], json.loads(row["detail"])) == ("enforce", 100, {
        "annotation": "kueue.x-k8s.io/priority-boost"})
    # A second cycle with the same cost changes nothing.
    assert _act(config, 5) == 0
    assert len(api.patches) == 1
    # Below the low mark after the minimum hold: the boost and the mark are removed, nothing else.
    _set(tmp_path, LOW, 40, 1 * H)
    assert _act(config, 40) == 0
    assert api.patches[1:] == [Patch(path, MERGE_PATCH, {"metadata": {
        "labels": {"preemptlens.io/action": None}, "annotations": {"kueue.x-k8s.io/priority-boost": None}}})]
    stored = api.get(WORKLOADS, "team-a", "job-low-4f2a1")
    assert stored is not None and not stored["metadata"].get("annotations")
    assert stored["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "0a0a0000-1111-4222-8333-00000000j0b1"}
    [row] = _rows(tmp_path)
    assert row["undone_at"] == minutes(40) and row["undo_why"].startswith("below the low marks")


CASES = Path(__file__).resolve().parents[1] / "cases" / "kubernetes"
RECORDED_CRDS = sorted(p.stem.removeprefix("crd_workloads_kueue_") for p in CASES.glob("crd_workloads_kueue_*.json"))


def _spec_fields(crd: dict[str, Any]) -> set[str]:
    return {name for v in crd["spec"]["versions"] if v["served"]
            for name in v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]}


@pytest.mark.parametrize("kueue", RECORDED_CRDS)
def test_each_released_kueue_crd_gets_only_what_it_reads(tmp_path: Path, api: FakeApiServer, kueue: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Each release's Workload CRD as its tag defines it (recorded, source named in the case): the effector writes
    the boost annotation where that release reads one (v0.17.0 on, gate PriorityBoost) and nothing under spec
    that the served schema lacks; before 0.17 it refuses. The advice names the same annotation and gate."""
    case = load_case(f"crd_workloads_kueue_{kueue}.json")
    boost = case["boost"]
    assert case["source"]["version"].startswith("v") and boost["typed_field"] is None
    config = _setup(tmp_path, api, kueue_boost("enforce"), {LOW: (9 * H, None)}, kueue=kueue)
    code = _act(config, 0)
    if boost["annotation"] is None:
        assert code != 0 and api.patches == [] and _rows(tmp_path) == []
        assert "before v0.17.0" in caplog.text
        return
    assert code == 0
    [patch] = api.patches
    assert patch.body == {"metadata": {"labels": {"preemptlens.io/action": "kueue_boost"},
                                       "annotations": {boost["annotation"]: "100"}}}
    assert set(patch.body.get("spec", {})) <= _spec_fields(case["object"])
    text = snippets.kueue_boost(100)
    assert f"{boost['annotation']}=100" in text and boost["feature_gate"]["name"] in text
    assert f"v{boost['feature_gate']['since']}.0" in text
    # Every typed Workload field the advice patches exists in the release's served schema (none do today).
    for patched in re.findall(r'"spec":\{"(\w+)"', text):
        assert patched in _spec_fields(case["object"]), patched


def test_kueue_boost_writes_the_annotation_when_the_crd_cannot_be_read(tmp_path: Path, api: FakeApiServer) -> None:
    config = _setup(tmp_path, api, kueue_boost("enforce"), {LOW: (9 * H, None)})
    api.crds.clear()
    api.forbidden.add(CRDS)  # RBAC without customresourcedefinitions: which Kueue runs is unknown
    assert _act(config, 0) == 0
    assert [p.body for p in api.patches] == [{
        "metadata": {"labels": {"preemptlens.io/action": "kueue_boost"},
                     "annotations": {"kueue.x-k8s.io/priority-boost": "100"}}}]


def test_kueue_boost_api_annotation_skips_the_crd(tmp_path: Path, api: FakeApiServer) -> None:
    config = _setup(tmp_path, api, 'kueue_boost_api = "annotation"\n' + kueue_boost("enforce"),
                    {LOW: (9 * H, None)}, kueue="0.16")
    assert _act(config, 0) == 0
    assert [p.body for p in api.patches] == [{"metadata": {
        "labels": {"preemptlens.io/action": "kueue_boost"}, "annotations": {"kueue.x-k8s.io/priority-boost": "100"}}}]
    assert not [q for q in api.requests if q[0].startswith("/apis/apiextensions")]


def test_dry_run_sends_no_patch(tmp_path: Path, api: FakeApiServer) -> None:
    config = _setup(tmp_path, api, kueue_boost("dry-run") + """
[kai_protect]
enabled = true
near_completion_high = 0.9
max_pool_share = 1.0
""", {LOW: (9 * H, None), TRAIN: (None, 0.95)})
    assert _act(config, 0) == 0
    _set(tmp_path, LOW, 40, 1 * H)
    _set(tmp_path, TRAIN, 40, None, 0.96)
    assert _act(config, 40) == 0
    assert api.patches == []
    assert not [r for r in api.requests if r[0].startswith(("/apis/kueue", "/apis/scheduling"))]
    rows = _rows(tmp_path)
    assert [(r["action"], r["job_id"], r["mode"], r["undone_at"] is None) for r in rows] == [
        ("kueue_boost", LOW, "dry-run", False), ("kai_protect", TRAIN, "dry-run", True)]


def test_kai_enforce_makes_the_podgroup_non_preemptible_and_restores_it(tmp_path: Path, api: FakeApiServer) -> None:
    config = _setup(tmp_path, api, kai_protect(min_hold_s=0), {TRAIN: (None, 0.95), INFER: (None, 0.5)})
    assert _act(config, 0) == 0
    path = "/apis/scheduling.run.ai/v2alpha2/namespaces/research/podgroups/pg-train"
    assert api.patches == [Patch(path, MERGE_PATCH, {"metadata": {"labels": {"preemptlens.io/action": "kai_protect"}},
                                                     "spec": {"preemptibility": "non-preemptible"}})]
    stored = api.get(PODGROUPS, "research", "pg-train")
    assert stored is not None and stored["spec"]["preemptibility"] == "non-preemptible"
    assert json.loads(_rows(tmp_path)[0]["detail"]) == {"preemptibility": ""}
    # The job finished: the field it did not have is removed again.
    with Warehouse(tmp_path / "w.duckdb") as wh:
        World(wh).gone(TRAIN)
    assert _act(config, 10) == 0
    assert api.patches[1:] == [Patch(path, MERGE_PATCH, {"metadata": {"labels": {"preemptlens.io/action": None}},
                                                         "spec": {"preemptibility": None}})]
    stored = api.get(PODGROUPS, "research", "pg-train")
    assert stored is not None
    assert stored["spec"] == {"minMember": 4, "queue": "research-train", "priorityClassName": "train"}
    assert not stored["metadata"].get("labels")


def test_a_podgrouper_rewrite_is_noticed_and_the_protection_applied_again(tmp_path: Path, api: FakeApiServer) -> None:
    config = _setup(tmp_path, api, kai_protect(), {TRAIN: (None, 0.95)})
    assert _act(config, 0) == 0
    # KAI's podgrouper recomputes the spec from the pods' owner and drops the field; the label stays.
    stored = api.get(PODGROUPS, "research", "pg-train")
    assert stored is not None
    del stored["spec"]["preemptibility"]
    api.modify(PODGROUPS, stored)
    assert _act(config, 5) == 0
    rows = _rows(tmp_path)
    assert [r["undo_why"] for r in rows] == ["not held by the scheduler (it holds nothing); closed at reconcile",
                                              "released at reconcile: the hold was not recorded", None]
    stored = api.get(PODGROUPS, "research", "pg-train")
    assert stored is not None and stored["spec"]["preemptibility"] == "non-preemptible"


def test_a_refused_patch_is_recorded_and_retried_after_the_minimum_hold(tmp_path: Path, api: FakeApiServer) -> None:
    config = _setup(tmp_path, api, kueue_boost("enforce"), {LOW: (9 * H, None)})
    # RBAC without patch on Workloads: the list and the read answer, the patch is refused.
    api.refuse_patches = True
    assert _act(config, 0) == 1
    [row] = _rows(tmp_path)
    assert row["undone_at"] == minutes(0)
    assert row["undo_why"].startswith("apply failed: kubernetes: cannot patch Workload team-a/job-low-4f2a1: "
                                      "HTTP 403 Forbidden")
    _set(tmp_path, LOW, 10, 9 * H)
    assert _act(config, 10) == 0  # within min_hold_s: not tried again
    assert len(_rows(tmp_path)) == 1 and len(api.patches) == 1
    api.refuse_patches = False
    _set(tmp_path, LOW, 31, 9 * H)
    assert _act(config, 31) == 0
    assert [r["undone_at"] is None for r in _rows(tmp_path)] == [False, True]
