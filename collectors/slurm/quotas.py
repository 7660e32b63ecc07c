"""The quotas and pools Slurm is configured with: rows of `scheduler_quotas`.

- Partitions (`scontrol show partition -o`): their PriorityTier and node list; partitions on other nodes or
  of another PriorityTier are tiered pools.
- GPU limits (`sacctmgr show qos` and `show assoc`, GrpTRES): a QOS or an account whose GrpTRES bounds
  `gres/gpu` (or its typed forms `gres/gpu:a100`, summed when no untyped bound is given) is a quota.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from preemptlens.collectors.base import quota_changes
from preemptlens.collectors.slurm.policy import partition_words
from preemptlens.contract import Batch, Watermark
from preemptlens.errors import SourceError

log = logging.getLogger(__name__)

PARTITIONS = ["scontrol", "show", "partition", "-o"]
QOS = ["sacctmgr", "-n", "-P", "show", "qos", "format=Name,GrpTRES"]
ASSOCIATIONS = ["sacctmgr", "-n", "-P", "show", "assoc", "format=Cluster,Account,User,GrpTRES"]


def gpu_limit(tres: str) -> float | None:
    """The GPUs a TRES list bounds: `gres/gpu=N`, else the sum of the typed `gres/gpu:TYPE=N`; None: none."""
    untyped: float | None = None
    typed = 0.0
    found_typed = False
    for part in tres.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or not (name == "gres/gpu" or name.startswith("gres/gpu:")):
            continue
        try:
            count = float(value)
        except ValueError:
            continue  # not a count: no bound this reader can state
        if count < 0:
            continue
        if name == "gres/gpu":
            untyped = count
        else:
            typed += count
            found_typed = True
    return untyped if untyped is not None else (typed if found_typed else None)


def partition_rows(text: str) -> list[dict[str, Any]]:
    found = []
    for words in partition_words(text):
        tier = words.get("PriorityTier", "")
        found.append({"kind": "partition", "name": words["PartitionName"],
                      "priority_tier": int(tier) if tier.isdigit() else None, "nodes": words.get("Nodes") or None,
                      "gpu_limit": None})
    return found


def qos_rows(text: str) -> list[dict[str, Any]]:
    """`sacctmgr -n -P show qos format=Name,GrpTRES`: the QOS that bound GPUs."""
    found = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        limit = gpu_limit(parts[1])
        if limit is not None:
            found.append({"kind": "qos", "name": parts[0], "gpu_limit": limit})
    return found


def account_rows(text: str, cluster: str) -> list[dict[str, Any]]:
    """`sacctmgr -n -P show assoc format=Cluster,Account,User,GrpTRES`: the accounts (and users in an account)
    of this cluster that bound GPUs; a user's association is named account/user."""
    found = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 4 or not parts[1] or (parts[0] and parts[0] != cluster):
            continue
        limit = gpu_limit(parts[3])
        if limit is None:
            continue
        name = f"{parts[1]}/{parts[2]}" if parts[2] else parts[1]
        found.append({"kind": "account", "name": name, "parent": parts[1] if parts[2] else None,
                      "gpu_limit": limit})
    return found


def batches(cluster: str, run: Callable[[list[str]], str], source: str, cursor: str | None) -> Iterator[Batch]:
    """One batch of what changed in the cluster's partitions and GPU limits since the last collection (its
    cursor); none (a warning) when Slurm cannot say."""
    at = datetime.now(UTC).replace(microsecond=0)
    try:
        found = partition_rows(run(PARTITIONS))
        found += qos_rows(run(QOS))
        found += account_rows(run(ASSOCIATIONS), cluster)
    except SourceError as exc:
        log.warning("slurm: cannot read partitions and GPU limits, quotas stay unknown: %s", exc.message)
        return
    rows = [{"scheduler": "slurm", "_record": f"{r['kind']} {r['name']}", **r} for r in found]
    changed, mark = quota_changes(cluster, cursor, rows, at)
    yield Batch(source=source, frames={} if changed is None else {"scheduler_quotas": changed},
                watermarks=[Watermark(source, cluster, "quotas", mark)])
