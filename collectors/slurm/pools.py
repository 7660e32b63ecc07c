"""GPU pools of a Slurm cluster, from `scontrol show node -o`.

A pool is a set of GPUs that jobs compete for. With
`PreemptType=preempt/partition_prio` the partitions usually overlap: a
`high` and a `low` partition over the same nodes, and the high jobs preempt
the low ones. Taking each partition as its own pool would split one set of
GPUs in two, and every figure that compares a preemptor's need with what
the pool held (the gain, avoidable preemptions, unallocated idle capacity,
scarcity) would see only half of it. So partitions that share a node are one
pool, named after its partitions (`high+low`); `slurm.pools` in config maps a
partition to a pool by name instead.

A pool's GPUs are those of the distinct nodes of its partitions: the node's
`CfgTRES` gres/gpu count, or the sum of the gpu entries of its `Gres`
(`gpu:8`, `gpu:a100:4(S:0-1),gpu:v100:2`) where CfgTRES does not count GPUs.
Drained and down nodes count: capacity is what the pool is built to hold.

Capacity rows come from collectors.base.capacity_changes, as for every
collector: when a pool is first seen (valid from the start of the data
collected then, or of an earlier backfill later) and whenever its GPU count
changes (valid from that collection); an unchanged cluster writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

_GRES_GPU = re.compile(r"^gpu(?::[^:(]+)?:(\d+)")
_TRES_GPU = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    partitions: tuple[str, ...]


def _node_gpus(words: Mapping[str, str]) -> int:
    tres = _TRES_GPU.search(words.get("CfgTRES", ""))
    if tres:
        return int(tres.group(1))
    total = 0
    # Entries are split on commas outside brackets: "gpu:a100:4(S:0-1),gpu:v100:2".
    for entry in re.split(r",(?![^(]*\))", words.get("Gres", "")):
        match = _GRES_GPU.match(entry.strip())
        if match:
            total += int(match.group(1))
    return total


def parse_nodes(text: str) -> list[Node]:
    """`scontrol show node -o`: one node per line, KEY=VALUE words (values such
    as OS= may hold spaces; the words without `=` are theirs and skipped)."""
    nodes = []
    for line in text.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        name = words.get("NodeName")
        if not name:
            continue
        parts = tuple(p for p in words.get("Partitions", "").split(",") if p)
        nodes.append(Node(name, _node_gpus(words), parts))
    return nodes


def pool_map(nodes: Iterable[Node], overrides: Mapping[str, str]) -> dict[str, str]:
    """Partition -> pool: partitions sharing a node are one pool (config wins)."""
    parent: dict[str, str] = {}

    def root(p: str) -> str:
        while parent.setdefault(p, p) != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for node in nodes:
        free = [p for p in node.partitions if p not in overrides]
        for p in free:
            root(p)
        for a, b in pairwise(free):
            parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for p in parent:
        groups.setdefault(root(p), []).append(p)
    named = {p: "+".join(sorted(members)) for members in groups.values() for p in members}
    return {**named, **overrides}


def capacity(nodes: Iterable[Node], pool_of: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """Pool -> (GPUs, most GPUs on one node), each node counted once per pool."""
    members: dict[str, dict[str, int]] = {}
    for node in nodes:
        for part in node.partitions:
            if part in pool_of:
                members.setdefault(pool_of[part], {})[node.name] = node.gpus
    # A pool without GPUs (a CPU partition) has nothing for these figures to compare.
    return {pool: (sum(gpus.values()), max(gpus.values())) for pool, gpus in members.items()
            if sum(gpus.values()) > 0}
