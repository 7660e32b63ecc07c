"""The preemption policy Kueue ClusterQueues and KAI Queues state (collectors/kubernetes/policy.py), from the
projects' own documentation examples (tests/cases/policy/SOURCES.md), and what the replay makes of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.whatif.policy_in_force import policy_in_force
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.collectors.kubernetes.policy import (
    cluster_queue_rows,
    go_duration_s,
    kai_queue_rows,
    policy_batch,
)
from preemptlens.warehouse import Warehouse

CASES = Path(__file__).resolve().parent.parent / "cases" / "policy"


def _items(name: str) -> list[Any]:
    return list(json.loads((CASES / name).read_text())["items"])


def test_cluster_queue_preemption_with_its_defaults() -> None:
    team_a, plain = _items("kueue_clusterqueues.json")
    rows = {(r[1], r[2]): r[3] for r in cluster_queue_rows(team_a)}
    assert rows[("team-a-cq", "within_cluster_queue")] == "LowerPriority"
    assert rows[("team-a-cq", "reclaim_within_cohort")] == "Any"
    assert rows[("team-a-cq", "borrow_within_cohort")] == "LowerPriority"
    assert rows[("team-a-cq", "borrow_max_priority")] == "100"
    rows = {(r[1], r[2]): (r[3], r[4]) for r in cluster_queue_rows(plain)}
    assert rows[("cluster-queue", "within_cluster_queue")] == ("Never", "spec.preemption.withinClusterQueue unset "
                                                                        "(default)")
    assert rows[("cluster-queue", "queueing_strategy")][0] == "BestEffortFIFO"


def test_kai_queue_minimum_run_times() -> None:
    rows = {(r[1], r[2]): r[3] for q in _items("kai_queues.json") for r in kai_queue_rows(q)}
    assert rows[("production", "min_run_s")] == "20"
    assert rows[("production", "reclaim_min_run_s")] == "30"
    assert rows[("default-queue", "parent_queue")] == "default-parent-queue"
    assert ("default-queue", "min_run_s") not in rows


@pytest.mark.parametrize(("text", "seconds"), [("20s", 20.0), ("1h30m", 5400.0), ("10m", 600.0), ("0s", 0.0),
                                               ("1.5h", 5400.0), ("500ms", 0.5), ("", None), ("10", None),
                                               ("1x", None), (None, None), (30, None)])
def test_go_durations(text: Any, seconds: float | None) -> None:
    assert go_duration_s(text) == seconds


def test_objects_without_a_name_or_spec_give_no_row() -> None:
    assert cluster_queue_rows({"spec": {}}) == [] and kai_queue_rows("not an object") == []
    assert kai_queue_rows({"metadata": {"name": "q"}, "spec": {"preemptMinRuntime": "soon"}}) == []


def test_a_snapshot_is_written_once_and_the_replay_reads_it(tmp_path: Path) -> None:
    rows = [r for q in _items("kueue_clusterqueues.json") for r in cluster_queue_rows(q)]
    batch = policy_batch("k", "kueue", rows, None)
    assert batch is not None and batch.frames["scheduler_policy"].height == len(rows)
    assert policy_batch("k", "kueue", rows, batch.watermarks[0].cursor) is None
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.load_batch(batch)
        analyze(wh, AnalyticsSettings())
        start = datetime.now(UTC) - timedelta(hours=1)
        actual = policy_in_force(wh, Window("k", start, start + timedelta(minutes=30)), TuningSettings())
    assert actual.policy.scheduler == "kueue" and actual.kind("scheduler") == "kueue"
    assert actual.policy.queue_order == "submit"
    assert actual.policy.may_preempt["high"] == ("normal", "low")
    assert any("differ in withinClusterQueue" in n for n in actual.notes)
    assert any("reclaimWithinCohort" in n for n in actual.notes)
    # Read after the window: said so.
    assert any("after the window's start" in n for n in actual.notes)


def test_kai_preemption_delay_is_the_replays_trigger_where_every_podgroup_waits(tmp_path: Path) -> None:
    """KAI v0.17.0's PodGroup spec.preemptionDelay (from the kai.scheduler/preemption-delay annotation): a
    PodGroup evicts others only once pending that long since its creation or last eviction
    (pkg/scheduler/api/podgroup_info/job_info.go, PreemptionDelayEnd) - the replay's trigger wait."""
    from preemptlens.collectors.kubernetes.policy import kai_delay_rows

    podgroups = _items("kai_0.17_podgroups.json")
    some = {r[2]: r[3] for r in kai_delay_rows(podgroups)}
    assert some == {"preemption_delay_s": "120", "preemption_delay_on": "some"}
    every = [podgroups[1], {**podgroups[0], "spec": {**podgroups[0]["spec"], "preemptionDelay": "2m0s"}}]
    assert {r[2]: r[3] for r in kai_delay_rows(every)}["preemption_delay_on"] == "all"
    assert kai_delay_rows([podgroups[0]]) == [] and kai_delay_rows(["not an object"]) == []
    queues = [r for q in _items("kai_queues.json") for r in kai_queue_rows(q)]
    for given, trigger in ((podgroups, 0.0), (every, 120.0)):
        batch = policy_batch("k", "kai", queues + kai_delay_rows(given), None)
        assert batch is not None
        with Warehouse(tmp_path / f"w{trigger:g}.duckdb") as wh:
            wh.load_batch(batch)
            analyze(wh, AnalyticsSettings())
            start = datetime.now(UTC) - timedelta(hours=1)
            actual = policy_in_force(wh, Window("k", start, start + timedelta(minutes=30)), TuningSettings())
        assert actual.policy.trigger_wait_s == trigger
        if trigger:
            assert actual.kind("trigger_wait_s") == "kai" and "trigger_wait_s 120 s" in actual.describe()
        else:
            assert any("some PodGroups only" in n for n in actual.notes)
