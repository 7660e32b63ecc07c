"""KAI PodGroups' runs made of their pods (gangs), what the pods and events streams keep in their cursors, and
the trust setting: pure functions over the recorded KAI case's pods, no server."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from k8s_fake import CASES

from preemptlens.collectors.kubernetes import EventReader, KubernetesSettings, trusted_reporters
from preemptlens.collectors.kubernetes.events import DEFAULT_REPORTERS, Untrusted, preemptions
from preemptlens.collectors.kubernetes.gangs import KEEP_S, Gangs, dump_cursor, load_cursor
from preemptlens.collectors.kubernetes.objects import kai_member
from preemptlens.config import ClusterSettings, ConfigError, load_config

TIERING = ClusterSettings(tiers={"train": "low"}, default_tier="normal", preemptible_tiers=["low", "normal"])
GPU = "nvidia.com/gpu"
GROUP = "research/pg-llm-pretrain-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"


def _case() -> dict[str, Any]:
    return json.loads((CASES / "recorded" / "kai_gang_eviction_pods_only.json").read_text())


def _objects(step: int, op: str, resource: str) -> list[dict[str, Any]]:
    return [o["object"] for o in _case()["steps"][step]["apply"] if o["op"] == op and o["resource"] == resource]


def _observe(gangs: Gangs, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for pod in pods:
        member = kai_member(pod, GPU)
        assert member is not None
        gangs.observe(member)
    (found,) = [rows for group, rows in gangs.rows(TIERING) if group == GROUP]
    return list(found["job_runs"])


def _replacements(pods: list[dict[str, Any]], created: str) -> list[dict[str, Any]]:
    """The PyTorchJob's new pods after the eviction: new UIDs, created after the delete, running."""
    fresh = []
    for i, pod in enumerate(pods):
        new = copy.deepcopy(pod)
        new["metadata"]["uid"] = f"7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d{i:02d}"
        new["metadata"]["creationTimestamp"] = created
        new["status"]["startTime"] = created
        fresh.append(new)
    return fresh


def test_a_gang_eviction_ends_one_run_and_the_replacements_begin_the_next() -> None:
    running = _objects(0, "add", "pods")
    gangs = Gangs()
    (run,) = _observe(gangs, running)
    assert (run["run"], run["state"], run["gpus"], run["end_time"]) == (1, "running", 32, None)
    assert run["hosts"] == "dgx-01,dgx-02,dgx-03,dgx-04"
    deleted = _objects(1, "delete", "pods")
    (run,) = _observe(gangs, deleted)
    assert (run["state"], run["end_time"]) == ("cancelled", datetime(2026, 11, 3, 4, 20, 15, tzinfo=UTC))
    # The owner recreates its pods after the delete (the old ones still terminating): a second run.
    first, second = _observe(gangs, _replacements(running, "2026-11-03T04:20:13Z"))
    assert (first["run"], first["state"], first["gpus"]) == (1, "cancelled", 32)
    assert (second["run"], second["state"], second["gpus"]) == (2, "running", 32)
    assert second["start_time"] == datetime(2026, 11, 3, 4, 20, 13, tzinfo=UTC)


def test_a_gang_gone_unseen_stays_open_and_its_pods_order_does_not_matter() -> None:
    running = _objects(0, "add", "pods")
    gangs = Gangs()
    _observe(gangs, running)
    # A relist after 410 Gone shows the replacements first, and only at its end that the old pods are gone.
    fresh = _replacements(running, "2026-11-03T04:21:00Z")
    merged = _observe(gangs, fresh)
    assert len(merged) == 1  # not known yet: the old pods were running when last seen
    gangs.listed({p["metadata"]["uid"] for p in fresh}, None)
    first, second = next(rows["job_runs"] for group, rows in gangs.rows(TIERING) if group == GROUP)
    # the evicted gang keeps its last-seen state (a preemption link of its PodGroup ends it in stg_job_runs)
    assert (first["state"], first["end_time"], first["gpus"]) == ("running", None, 32)
    assert (second["run"], second["state"], second["gpus"]) == (2, "running", 32)


def test_the_pods_cursor_keeps_the_gangs_and_reads_an_older_bare_cursor() -> None:
    gangs = Gangs()
    _observe(gangs, _objects(0, "add", "pods"))
    cursor = dump_cursor("4711", gangs)
    assert cursor is not None and len(cursor) < 4000
    rv, again = load_cursor(cursor)
    assert rv == "4711" and again.dump() == gangs.dump()
    assert load_cursor("4711")[0] == "4711" and load_cursor("4711")[1].dump() == {}
    # a state that cannot be read only renumbers runs: it starts afresh rather than failing the stream
    assert load_cursor(json.dumps({"rv": "9", "kai": {"g": {"first": "soon"}}}))[1].dump() == {}


def test_runs_over_for_a_week_are_folded_into_a_count() -> None:
    gangs = Gangs()
    running = _objects(0, "add", "pods")
    _observe(gangs, running + _objects(1, "delete", "pods"))
    _observe(gangs, _replacements(running, "2026-11-03T04:21:00Z"))
    gangs.prune(datetime(2026, 11, 3, 4, 20, 15, tzinfo=UTC) + timedelta(seconds=KEEP_S + 1))
    gangs.changed.add(GROUP)
    (run,) = next(rows["job_runs"] for group, rows in gangs.rows(TIERING) if group == GROUP)
    assert (run["run"], run["state"]) == (2, "running")


def test_one_gang_eviction_is_one_link_across_collections() -> None:
    events = _objects(1, "add", "events")
    reader = EventReader("v1", DEFAULT_REPORTERS)
    reader.load("100")
    links = [lk for e in events[:1] for lk in reader.rows(e, "ADDED")["preemption_links"]]
    cursor = reader.dump("101")
    # the next collection resumes from the committed cursor: the gang's other three events add nothing
    later = EventReader("v1", DEFAULT_REPORTERS)
    assert later.load(cursor) == "101"
    links += [lk for e in events[1:] for lk in later.rows(e, "ADDED")["preemption_links"]]
    assert [(lk["victim_job_id"], lk["preemptor_job_id"], lk["reporter"]) for lk in links] == [
        (GROUP, "serving/pg-llm-infer-0c1d2e3f-4a5b-4c6d-8e7f-8a9b0c1d2e3f", "kai-scheduler")]
    # A stale gang's eviction (fewer pods left than the gang needs) is no preemption.
    stale = copy.deepcopy(events[0])
    stale["metadata"]["annotations"]["evictor-action-type"] = "stalegangeviction"
    assert preemptions(stale, "v1") == []


def test_a_writer_the_settings_name_is_trusted_and_others_keep_their_defaults(tmp_path: Path) -> None:
    event = _objects(1, "add", "events")[0]
    event["source"]["component"] = event["reportingComponent"] = "kai-scheduler-pool-a"
    with pytest.raises(Untrusted, match="kai-scheduler-pool-a"):
        preemptions(event, "v1")
    config = tmp_path / "c.toml"
    config.write_text('[kubernetes]\nreporters = { "kai" = ["kai-scheduler-pool-a"] }\n')
    trusted = trusted_reporters(load_config(str(config)).of(KubernetesSettings).reporters)
    assert [p.reporter for p in preemptions(event, "v1", trusted)] == ["kai-scheduler-pool-a"]
    assert trusted["kube-scheduler"] == frozenset({"default-scheduler"})  # a kind left out keeps its default
    config.write_text('[kubernetes]\nreporters = { "slurm" = ["slurmctld"] }\n')
    with pytest.raises(ConfigError, match="unknown kinds"):
        load_config(str(config))


def test_with_the_eviction_condition_the_gang_is_preempted_by_the_podgroup_its_message_names() -> None:
    """KAI with --update-pod-eviction-condition writes DisruptionTarget/PreemptionByScheduler with its eviction
    message: the run is preempted, by the PodGroup that message names, with or without an event."""
    pods = copy.deepcopy(_objects(1, "delete", "pods"))
    for pod in pods:
        pod["status"]["conditions"] = [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": f"Pod research/{pod['metadata']['name']} was preempted by higher priority workload serving/pg-y",
            "lastTransitionTime": "2026-11-03T04:20:11Z"}]
    (run,) = _observe(Gangs(), pods)
    assert (run["state"], run["preemptor_job_id"], run["gpus"]) == ("preempted", "serving/pg-y", 32)
