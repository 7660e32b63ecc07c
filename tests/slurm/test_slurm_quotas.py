"""Slurm's quotas and pools (scheduler_quotas, pool_structure): GrpTRES GPU limits and partitions.

The parsers on TRES lists as sacctmgr prints them, then the collector against the suite's real Slurm 22.05
(partitions low and high on one node, preempt/partition_prio), with a GPU limit set on a QOS and on an
account for the test and removed after it: sacctmgr's own output is the recorded payload.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from slurm_harness import ACCOUNTS, CLUSTER, SlurmCluster

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.collectors.slurm.quotas import account_rows, gpu_limit, partition_rows, qos_rows
from preemptlens.warehouse import Warehouse


@pytest.mark.parametrize(("tres", "gpus"), [
    ("gres/gpu=4", 4.0),
    ("cpu=64,gres/gpu=8,mem=512000M", 8.0),
    # typed limits add up when no untyped one bounds them all; an untyped one wins
    ("gres/gpu:a100=4,gres/gpu:h100=2", 6.0),
    ("gres/gpu=5,gres/gpu:a100=4", 5.0),
    ("cpu=16,mem=64G", None),
    ("", None),
])
def test_gpu_limit_of_a_tres_list(tres: str, gpus: float | None) -> None:
    assert gpu_limit(tres) == gpus


def test_parsers_keep_only_what_bounds_gpus() -> None:
    assert qos_rows("normal|\nhigh|gres/gpu=16\nlow|cpu=8\n") == [{"kind": "qos", "name": "high", "gpu_limit": 16.0}]
    assert account_rows(f"{CLUSTER}|vision||gres/gpu=6\n{CLUSTER}|vision|alice|gres/gpu=2\nother|speech||gres/gpu=9\n"
                        f"{CLUSTER}|speech||\n", CLUSTER) == [
        {"kind": "account", "name": "vision", "parent": None, "gpu_limit": 6.0},
        {"kind": "account", "name": "vision/alice", "parent": "vision", "gpu_limit": 2.0},
    ]
    line = "PartitionName=low AllowGroups=ALL Nodes=node1 PriorityTier=1 State=UP TotalNodes=1"
    assert partition_rows(line) == [{"kind": "partition", "name": "low", "priority_tier": 1, "nodes": "node1",
                                     "gpu_limit": None}]


CAPPED = "capped"


@pytest.fixture
def limited(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    slurm_cluster.run("sacctmgr", "-i", "add", "qos", CAPPED, check=False)
    slurm_cluster.run("sacctmgr", "-i", "modify", "qos", CAPPED, "set", "GrpTRES=gres/gpu=4")
    slurm_cluster.run("sacctmgr", "-i", "modify", "account", ACCOUNTS[0], "set", "GrpTRES=gres/gpu=6")
    try:
        yield slurm_cluster
    finally:
        # the other tests' jobs run unbounded again: -1 clears a limit
        slurm_cluster.run("sacctmgr", "-i", "delete", "qos", CAPPED, check=False)
        slurm_cluster.run("sacctmgr", "-i", "modify", "account", ACCOUNTS[0], "set", "GrpTRES=gres/gpu=-1",
                          check=False)


@pytest.mark.slow
def test_real_slurm_quotas_and_partitions(limited: SlurmCluster, tmp_path: Path) -> None:
    options = Options(cluster=CLUSTER, slurm_conf=str(limited.conf), lookback=timedelta(minutes=5),
                      lag=timedelta(seconds=30), window=timedelta(hours=1), timeout_s=60, policy=Policy())
    collector = SlurmCollector(options)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        for batch in collector.batches(wh.watermarks(collector.name)):
            wh.load_batch(batch)
        rows = {(r["kind"], r["name"]): r for r in wh.query("SELECT * FROM scheduler_quotas").to_dicts()}
        assert rows[("qos", CAPPED)]["gpu_limit"] == 4
        assert rows[("account", ACCOUNTS[0])]["gpu_limit"] == 6
        assert (rows[("partition", "low")]["priority_tier"], rows[("partition", "high")]["priority_tier"]) == (1, 10)
        assert rows[("partition", "low")]["nodes"] == rows[("partition", "high")]["nodes"]
        assert {r["scheduler"] for r in rows.values()} == {"slurm"} and {r["source"] for r in rows.values()} == {
            "slurm"}
        analyze(wh, AnalyticsSettings())
        (structure,) = wh.query("SELECT * FROM pool_structure").to_dicts()
    # GPU limits are quotas; high and low share their node: priority tiers, not tiered pools
    assert (structure["has_quotas"], structure["has_tiered_pools"]) == (True, False)
    assert "2 Slurm partition(s) on 1 node set(s)" in structure["detail"]
    assert f"GPU limits (GrpTRES): {CAPPED}, {ACCOUNTS[0]}" in structure["detail"]
