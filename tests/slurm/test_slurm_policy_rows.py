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


def test_without_preemption_the_tiers_come_from_what_orders_the_queue() -> None:
    # The suite's Slurm with PreemptType=preempt/none: partition PriorityTier still orders the queue, so high is
    # high and low is low (and could be preempted once preemption is on); the counterfactual asks what turning
    # it on would do.
    text = (CASES / "slurm_22_05_show_config.txt").read_text().replace("preempt/partition_prio", "preempt/none")
    policy = _policy_of(text, (CASES / "slurm_22_05_show_partition.txt").read_text())
    assert policy.preempt_type == "none" and policy.ordering == "partition"
    assert (policy.tier("high"), policy.tier("low")) == ("high", "low")
    assert policy.preemptible("low", "low") and not policy.preemptible("high", "high")
    rows = _rows(policy)
    assert rows[("partition", "high", "tier")][0] == "high" and rows[("partition", "low", "tier")][0] == "low"
    # One PriorityTier for every partition: QOS Priority orders the queue, the jobs' classes are their QOS.
    flat = (CASES / "slurm_22_05_show_partition.txt").read_text().replace("PriorityTier=10", "PriorityTier=1")
    qos = "normal|||||10\nurgent|||||1000\nscavenger|||||1\n"
    by_qos = _policy_of(text, flat, qos)
    assert by_qos.ordering == "qos" and by_qos.priority_class("low", "urgent") == "urgent"
    assert [by_qos.tier(q) for q in ("urgent", "normal", "scavenger")] == ["high", "normal", "low"]
    assert _rows(by_qos)[("qos", "scavenger", "preemptible")][0] == "true"


def _policy_of(config: str, partitions: str, qos: str = "") -> Policy:
    kind, mode = preempt_type_from_config(config)
    return Policy(preempt_type=kind, global_mode=mode, partitions=parse_partitions(partitions), qos=parse_qos(qos),
                  config=config_values(config))


def test_the_replay_reads_a_cluster_without_preemption_as_off_with_the_tiers_it_would_preempt_by() -> None:
    from preemptlens.analytics.whatif.policy_in_force import _slurm

    def stated(config: str) -> dict[str, tuple[object, str]]:
        policy = _policy_of(config, (CASES / "slurm_22_05_show_partition.txt").read_text())
        rows = [dict(zip(("scope", "subject", "setting", "value", "raw"), r, strict=True))
                for r in policy_rows(policy)]
        return _slurm(rows)[0]

    text = (CASES / "slurm_22_05_show_config.txt").read_text()
    off = stated(text.replace("preempt/partition_prio", "preempt/none"))
    assert off["enabled"][0] is False
    # What the counterfactual turns on: high evicts low, as PriorityTier orders them.
    assert off["may_preempt"][0]["high"] == ("low",) and "preempt/none" in off["may_preempt"][1]
    on = stated(text)
    assert on["enabled"][0] is True and on["may_preempt"][0] == off["may_preempt"][0]
    # bf_window (default 1440 minutes) bounds how far ahead backfill reserves.
    assert off["backfill_window_s"][0] == 86400.0
    # A run's exemption ending wakes no pass: the next periodic one finds it, the shorter of sched_interval and
    # bf_interval (2 s each in the suite's Slurm; defaults 60 s and 30 s).
    assert on["pass_interval_s"][0] == 2.0 and "bf_interval=2" in on["pass_interval_s"][1]
    defaults = stated(text.replace("sched_interval=2,bf_interval=2", ""))
    assert defaults["pass_interval_s"][0] == 30.0


@pytest.mark.parametrize(("version", "low_min_run"), [("25.11.3", 0.0), ("26.05.0", None)])
def test_preempt_exempt_time_holds_a_job_gang_would_suspend_from_26_05(version: str, low_min_run: float | None
                                                                       ) -> None:
    """With preempt/partition_prio and PreemptMode=SUSPEND,GANG the gang scheduler suspended a lower partition's
    jobs whatever their run until Slurm 26.05, which applies PreemptExemptTime to them (SchedMD/slurm
    CHANGELOG/slurm-26.05.md, 26.05.0rc1; src/plugins/select/cons_tres/job_test.c of slurm-26-05-0-1): the suite's
    recorded 22.05 configuration with PreemptExemptTime=00:01:00, as a gang cluster of each release states it
    (`scontrol show partition` prints an inherited mode with its GANG flag)."""
    from preemptlens.analytics.whatif.policy_in_force import _slurm

    config = ((CASES / "slurm_22_05_show_config_exempt.txt").read_text()
              .replace("PreemptMode             = REQUEUE", "PreemptMode             = SUSPEND,GANG")
              .replace("SLURM_VERSION           = 22.05.8", f"SLURM_VERSION           = {version}"))
    partitions = (CASES / "slurm_22_05_show_partition_grace.txt").read_text().replace(
        "PreemptMode=REQUEUE", "PreemptMode=GANG,SUSPEND")
    policy = _policy_of(config, partitions)
    rows = policy_rows(policy)
    by_key = {(scope, subject, setting): value for scope, subject, setting, value, _ in rows}
    assert by_key[("cluster", "", "gang")] == "true" and by_key[("partition", "low", "preempt_mode")] == "SUSPEND"
    stated, notes = _slurm([dict(zip(("scope", "subject", "setting", "value", "raw"), r, strict=True))
                            for r in rows])
    assert stated["min_run_s"][0] == 60.0
    if low_min_run is None:
        assert "min_run_by_tier" not in stated and any("26.05" in n for n in notes)
    else:
        assert stated["min_run_by_tier"][0] == {"low": low_min_run}
        assert "before 26.05" in stated["min_run_by_tier"][1]
    # REQUEUE without GANG: PreemptExemptTime holds every victim, whatever the release
    plain = _policy_of((CASES / "slurm_22_05_show_config_exempt.txt").read_text().replace(
        "SLURM_VERSION           = 22.05.8", f"SLURM_VERSION           = {version}"),
        (CASES / "slurm_22_05_show_partition_grace.txt").read_text())
    plain_rows = [dict(zip(("scope", "subject", "setting", "value", "raw"), r, strict=True))
                  for r in policy_rows(plain)]
    assert "min_run_by_tier" not in _slurm(plain_rows)[0]
    assert {r["value"] for r in plain_rows if r["setting"] == "gang"} == {"false"}
