"""Helpers shared by the collectors: the capacity (`pools`) rows every scheduler source writes.

What a collector hands to the load API (Batch, Reject, Watermark, Collector)
is part of the core: preemptlens.contract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class PoolRow:
    pool: str
    valid_from: datetime
    gpus: int
    gpus_per_node: int | None


def known_pools(cursor_text: str | None) -> set[str]:
    """The pools a capacity cursor (see capacity_changes) has written."""
    return set(json.loads(cursor_text)) if cursor_text else set()


def capacity_changes(cursor_text: str | None, now: Mapping[str, tuple[int, int | None]], data_start: datetime,
                     at: datetime | None) -> tuple[list[PoolRow], str]:
    """The `pools` rows for capacities read now, (GPUs, most GPUs of one node) per pool, and the next cursor.

    A pool is written when first seen, valid from `data_start` (where this
    collection's data begins; an earlier backfill later moves it back), and
    again when its capacity changes, valid from `at` (when it was read; None
    when the collection re-reads a past window: a change seen now is not a
    change of then). A node size of None (read from quotas) is no news about
    the nodes: the known one stays. The cursor keeps what was written.
    """
    state: dict[str, dict[str, Any]] = json.loads(cursor_text) if cursor_text else {}
    rows: list[PoolRow] = []
    for pool, (gpus, per_node) in sorted(now.items()):
        known = state.get(pool)
        if known is None:
            # A pool without GPUs has nothing for the capacity figures to compare.
            if gpus > 0:
                rows.append(PoolRow(pool, data_start, gpus, per_node))
                state[pool] = {"first": data_start.isoformat(), "first_cap": [gpus, per_node],
                               "cap": [gpus, per_node]}
            continue
        first = datetime.fromisoformat(str(known["first"]))
        if data_start < first:
            first_gpus, first_per_node = known["first_cap"]
            rows.append(PoolRow(pool, data_start, int(first_gpus), first_per_node))
            known["first"] = data_start.isoformat()
        per_node = per_node if per_node is not None else known["cap"][1]
        if at is not None and list(known["cap"]) != [gpus, per_node]:
            rows.append(PoolRow(pool, at, gpus, per_node))
            known["cap"] = [gpus, per_node]
    return rows, json.dumps(state, sort_keys=True)
