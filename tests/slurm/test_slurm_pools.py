"""Pools from `scontrol show node -o`: parsing, grouping and capacity rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from preemptlens.collectors.base import capacity_changes
from preemptlens.collectors.slurm.pools import Node, capacity, parse_nodes, pool_map

# Slurm 22.05's own line for the test cluster's node (OS= holds spaces).
NODE_LINE = (
    "NodeName=node1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=5.53 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=127.0.0.1 NodeHostName=vm "
    "Version=22.05.8 OS=Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=16000 AllocMem=0 "
    "FreeMem=15658 Sockets=16 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
    "MCS_label=N/A Partitions=low,high  BootTime=2026-12-02T18:48:25 SlurmdStartTime=2026-12-03T04:49:38 "
    "LastBusyTime=2026-12-03T04:49:38 CfgTRES=cpu=16,mem=16000M,billing=16,gres/gpu=8 AllocTRES= "
    "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"
)
T0 = datetime(2026, 11, 1, tzinfo=UTC)
T1 = datetime(2026, 11, 20, tzinfo=UTC)


def test_a_real_node_line() -> None:
    assert parse_nodes(NODE_LINE + "\n\n") == [Node("node1", 8, ("low", "high"))]


def test_gpus_from_gres_when_cfgtres_does_not_count_them() -> None:
    text = "\n".join([
        "NodeName=a Gres=gpu:a100:4(S:0-1),gpu:v100:2,shard:8 CfgTRES=cpu=64,mem=500G Partitions=p",
        "NodeName=b Gres=(null) CfgTRES=cpu=64 Partitions=cpu",
        "NodeName=c Gres=gpu:h100:8(S:0-1) CfgTRES=cpu=96,gres/gpu=8,gres/gpu:h100=8 Partitions=p",
        "NodeName=d Gres=mps:100,gpu:2 Partitions=p",
    ])
    assert [(n.name, n.gpus) for n in parse_nodes(text)] == [("a", 6), ("b", 0), ("c", 8), ("d", 2)]


def test_partitions_sharing_a_node_are_one_pool() -> None:
    nodes = [
        Node("n1", 8, ("low", "high")),
        Node("n2", 8, ("low",)),
        Node("n3", 4, ("debug",)),
        Node("n4", 8, ("mid", "urgent")),
        Node("n5", 8, ("urgent", "low")),  # chains mid+urgent into low+high
    ]
    pools = pool_map(nodes, {})
    assert pools == {p: "high+low+mid+urgent" for p in ("low", "high", "mid", "urgent")} | {"debug": "debug"}
    assert capacity(nodes, pools) == {"high+low+mid+urgent": (32, 8), "debug": (4, 4)}


def test_config_names_a_partitions_pool() -> None:
    nodes = [Node("n1", 8, ("low", "high")), Node("n2", 4, ("cpu-only",)), Node("n3", 0, ("cpu-only",))]
    pools = pool_map(nodes, {"high": "a100", "low": "a100"})
    assert pools == {"high": "a100", "low": "a100", "cpu-only": "cpu-only"}
    assert capacity([Node("n3", 0, ("cpu-only",))], pools) == {}  # no GPUs: no pool row
    assert capacity(nodes, pools)["a100"] == (8, 8)


def test_capacity_rows_only_when_new_changed_or_earlier() -> None:
    rows, cursor = capacity_changes(None, {"high+low": (16, 8)}, T0, T1)
    assert [(r.pool, r.valid_from, r.gpus, r.gpus_per_node) for r in rows] == [("high+low", T0, 16, 8)]

    again, same = capacity_changes(cursor, {"high+low": (16, 8)}, T1, T1)
    assert again == [] and json.loads(same) == json.loads(cursor)

    grown, cursor2 = capacity_changes(cursor, {"high+low": (24, 8)}, T1, T1)
    assert [(r.valid_from, r.gpus) for r in grown] == [(T1, 24)]

    # A backfill reaching before the first row: the first capacity holds from there.
    earlier = datetime(2026, 10, 1, tzinfo=UTC)
    back, _ = capacity_changes(cursor2, {"high+low": (24, 8)}, earlier, None)
    assert [(r.valid_from, r.gpus) for r in back] == [(earlier, 16)]

    # A re-read of the past (--until) does not date today's change back to then.
    past, _ = capacity_changes(cursor2, {"high+low": (32, 8)}, T0, None)
    assert past == []
