"""Helpers shared by the collectors: the capacity (`pools`) rows every scheduler source writes, and the frame
of the quotas and pools a scheduler is configured with (`scheduler_quotas`).

What a collector hands to the load API (Batch, Reject, Watermark, Collector)
is part of the core: preemptlens.contract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl


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


QUOTA_COLUMNS: dict[str, pl.DataType] = {
    "cluster": pl.String(), "scheduler": pl.String(), "kind": pl.String(), "name": pl.String(),
    "parent": pl.String(), "gpu_quota": pl.Float64(), "gpu_limit": pl.Float64(), "priority_tier": pl.Int32(),
    "nodes": pl.String(), "observed_at": pl.Datetime("us", "UTC"), "removed": pl.Boolean(), "_record": pl.String(),
}
_QUOTA_VALUES = ("parent", "gpu_quota", "gpu_limit", "priority_tier", "nodes")


def quota_changes(cluster: str, cursor_text: str | None, rows: list[dict[str, Any]], at: datetime
                  ) -> tuple[pl.DataFrame | None, str]:
    """The `scheduler_quotas` rows to load, and the new cursor: only the objects that are new or changed since
    the cursor's collection (seen at `at`), and those it held that are gone (`removed`), so that collecting
    an unchanged scheduler again loads nothing. `rows` hold scheduler, kind, name and the values of what a
    read that succeeded listed (a failed read must not call this: everything would read as removed)."""
    before: dict[str, list[Any]] = json.loads(cursor_text) if cursor_text else {}
    now: dict[str, list[Any]] = {}
    changed: list[dict[str, Any]] = []
    for r in rows:
        key = "\x1f".join((r["scheduler"], r["kind"], r["name"]))
        values = [r.get(k) for k in _QUOTA_VALUES]
        now[key] = values
        if before.get(key) != values:
            changed.append({**r, "cluster": cluster, "observed_at": at, "removed": False})
    for key, values in before.items():
        if key not in now:
            scheduler, kind, name = key.split("\x1f")
            changed.append({"cluster": cluster, "scheduler": scheduler, "kind": kind, "name": name,
                            **dict(zip(_QUOTA_VALUES, values, strict=True)), "observed_at": at, "removed": True,
                            "_record": f"{kind} {name} (removed)"})
    frame = pl.DataFrame([{k: r.get(k) for k in QUOTA_COLUMNS} for r in changed], schema=QUOTA_COLUMNS,
                         orient="row") if changed else None
    return frame, json.dumps(now, sort_keys=True)
