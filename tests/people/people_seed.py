"""Small hand-made warehouses the people tests (ad-hoc SQL, alerts) seed column by column."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from preemptlens.warehouse import Warehouse

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


def load_rows(wh: Warehouse, table: str, **columns: Sequence[object]) -> None:
    """Load one table given as columns, under the source "test". The seeds here spell out every value; this
    keeps each seed to its table name and its columns."""
    wh.load(table, pl.DataFrame(columns), "test")


def jobs_warehouse(folder: Path) -> Path:
    """A warehouse in `folder` holding three jobs submitted at T0: 1 and 3 of team nlp (low tier, preemptible,
    8 and 2 GPUs), 2 of team vision (high tier, not preemptible, 4 GPUs). Both ad-hoc SQL test files read it;
    test_sql adds runs and samples."""
    path = folder / "w.duckdb"
    with Warehouse(path) as wh:
        load_rows(
            wh,
            "jobs",
            cluster=["c1"] * 3,
            job_id=["1", "2", "3"],
            team=["nlp", "vision", "nlp"],
            tier=["low", "high", "low"],
            preemptible=[True, False, True],
            gpus=[8, 4, 2],
            submit_time=[T0] * 3,
        )
    return path
