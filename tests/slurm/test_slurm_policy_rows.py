"""The preemption settings the Slurm collector reads, from recorded output of a real Slurm 22.05 (tests/cases/policy,
SOURCES.md says where each came from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from preemptlens.collectors.slurm.policy import (
    Policy,
    config_values,
    parse_partitions,
    parse_qos,
    policy_rows,
    preempt_type_from_config,
    slurm_duration_s,
)

CASES = Path(__file__).resolve().parent.parent / "cases" / "policy"


def _policy(config: str, partitions: str, qos: str = "slurm_22_05_qos.txt") -> Policy:
    text = (CASES / config).read_text()
    kind, mode = preempt_type_from_config(text)
    return Policy(preempt_type=kind, global_mode=mode, partitions=parse_partitions((CASES / partitions).read_text()),
                  qos=parse_qos((CASES / qos).read_text()), config=config_values(text))


def _rows(policy: Policy) -> dict[tuple[str, str, str], tuple[str, str]]:
    return {(scope, subject, setting): (value, raw) for scope, subject, setting, value, raw in policy_rows(policy)}


def test_the_suites_slurm_states_its_preemption_policy() -> None:
    rows = _rows(_policy("slurm_22_05_show_config.txt", "slurm_22_05_show_partition.txt"))
    assert rows[("cluster", "", "preempt_type")] == ("partition_prio", "PreemptType=preempt/partition_prio")
    assert rows[("cluster", "", "preempt_mode")][0] == "REQUEUE"
    assert rows[("cluster", "", "min_run_s")] == ("0", "PreemptExemptTime=00:00:00")
    # cred_expire=10: a requeued job may start 11 s after its requeue.
    assert rows[("cluster", "", "requeue_hold_s")][0] == "11"
    assert rows[("cluster", "", "youngest_first")][0] == "false"
    assert rows[("cluster", "", "reorder_count")][0] == "1"
    assert rows[("cluster", "", "priority_type")][0] == "priority/basic"
    assert rows[("partition", "low", "priority_tier")][0] == "1"
    assert rows[("partition", "high", "priority_tier")][0] == "10"
    assert rows[("partition", "low", "grace_s")] == ("0", "GraceTime=0")
    assert rows[("partition", "low", "tier")][0] == "low" and rows[("partition", "high", "tier")][0] == "high"
    assert rows[("partition", "low", "preemptible")][0] == "true"
    assert rows[("partition", "high", "preemptible")][0] == "false"
    assert rows[("qos", "normal", "grace_s")][0] == "0"
    # No DefaultTime and MaxTime=UNLIMITED: a job submitted without --time has no limit, so Slurm's backfill
    # cannot place a reservation at a finite time.
    assert ("partition", "low", "default_time_s") not in rows
    assert rows[("partition", "low", "max_time_s")][0] == "inf"
    # The two passes: bf_interval and sched_interval as set, the rest at Slurm's defaults (backfill.c,
    # job_scheduler.c of slurm-22-05-11-1).
    assert rows[("cluster", "", "bf_interval")] == ("2", "SchedulerParameters bf_interval=2")
    assert rows[("cluster", "", "sched_interval")][0] == "2"
    assert rows[("cluster", "", "bf_window")][0] == "1440"
    assert rows[("cluster", "", "bf_resolution")][0] == "60"
    assert rows[("cluster", "", "default_queue_depth")][0] == "100"
    assert rows[("cluster", "", "bf_continue")][0] == "false"
    assert rows[("cluster", "", "scheduler_type")][0] == "sched/backfill"


def test_a_partitions_default_time_comes_before_its_max_time() -> None:
    text = (CASES / "slurm_22_05_show_partition.txt").read_text()
    parts = parse_partitions(text.replace("DefaultTime=NONE", "DefaultTime=01:00:00", 1)
                             .replace("MaxTime=UNLIMITED", "MaxTime=2-00:00:00", 1))
    assert (parts["low"].default_time_s, parts["low"].max_time_s, parts["low"].time_limit_s) == (3600, 172800, 3600)
    assert parts["high"].time_limit_s == float("inf")


def test_preempt_exempt_time_is_a_minimum_run_and_grace_time_stays_grace() -> None:
    rows = _rows(_policy("slurm_22_05_show_config_exempt.txt", "slurm_22_05_show_partition_grace.txt"))
    assert rows[("cluster", "", "min_run_s")] == ("60", "PreemptExemptTime=00:01:00")
    assert rows[("partition", "low", "grace_s")] == ("30", "GraceTime=30")
    assert not any(setting == "grace_s" and scope == "cluster" for scope, _, setting in rows)


def test_preempt_parameters_of_23_02_and_the_older_scheduler_parameters() -> None:
    base = (CASES / "slurm_22_05_show_config.txt").read_text()
    newer = base.replace("PreemptExemptTime       = 00:00:00",
                         "PreemptExemptTime       = 00:00:00\nPreemptParameters       = youngest_first,reorder_count=3,"
                         "min_exempt_priority=5000")
    older = base.replace("SchedulerParameters     = sched_interval=2,bf_interval=2",
                         "SchedulerParameters     = sched_interval=2,preempt_youngest_first,preempt_strict_order,"
                         "requeue_delay=30")
    for text, expected in ((newer, {"youngest_first": "true", "reorder_count": "3", "min_exempt_priority": "5000",
                                    "strict_order": "false", "requeue_hold_s": "11"}),
                           (older, {"youngest_first": "true", "strict_order": "true", "reorder_count": "1",
                                    "requeue_hold_s": "31"})):
        kind, mode = preempt_type_from_config(text)
        rows = _rows(Policy(preempt_type=kind, global_mode=mode, config=config_values(text)))
        assert {k: rows[("cluster", "", k)][0] for k in expected} == expected


@pytest.mark.parametrize(("text", "seconds"), [
    ("00:01:00", 60.0), ("1-00:00:00", 86400.0), ("10", 600.0), ("05:30", 330.0), ("2-3", 2 * 86400.0 + 3 * 3600.0),
    ("NONE", None), ("INFINITE", None), ("", None), ("(null)", None), ("bogus", None), ("1:2:3:4", None),
])
def test_slurm_times(text: str, seconds: float | None) -> None:
    assert slurm_duration_s(text) == seconds


def test_nothing_is_stated_when_the_configuration_was_not_read() -> None:
    assert policy_rows(Policy()) == []
