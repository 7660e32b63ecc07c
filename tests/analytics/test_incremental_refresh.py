"""An incremental `analyze` after new data must leave every derived table as a full one does.

The simulator writes a few days of a cluster with hoarders; the last part of
it (samples, jobs, runs, checkpoints from a cut-off on) is held back and then
loaded in two later loads, each followed by an incremental analyze. Stretches
that cross the cut-offs are the case the incremental scan must get right.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analytics.params import params_from
from analytics.refresh import analyze
from analytics.simulator import DEMO, PoolSpec, SimConfig, simulate_into
from analytics.views import registry
from preemptlens.config import load_config
from preemptlens.warehouse import Warehouse, quote

START = datetime(2026, 10, 5, tzinfo=UTC)
SIM = SimConfig(
    cluster="incr",
    start=START,
    days=4.0,
    pools=(PoolSpec("a100", nodes=6),),
    workload=dataclasses.replace(DEMO.workload, seed=5, load=0.95, hoarding_share=0.25),
)
# Held back, then loaded in this order: each part is what arrived after its cut-off.
CUTS = (START + timedelta(days=2, hours=13, minutes=7), START + timedelta(days=3, hours=5, minutes=31))
# The column that dates a row of each held-back table.
HELD = {"gpu_samples": "time", "checkpoints": "time", "job_runs": "start_time", "jobs": "submit_time"}


def _hold_back(wh: Warehouse, cut: datetime, part: int) -> None:
    for table, column in HELD.items():
        wh.con.execute(
            f"CREATE TEMP TABLE {quote(f'held_{part}_{table}')} AS "
            f"SELECT * FROM {quote(table)} WHERE {quote(column)} >= $cut",
            {"cut": cut},
        )
        wh.con.execute(f"DELETE FROM {quote(table)} WHERE {quote(column)} >= $cut", {"cut": cut})


def _release(wh: Warehouse, part: int) -> None:
    """Put a held-back part back as one new load, as a collector would."""
    load_id = uuid.uuid4().hex
    now = datetime.now(UTC)
    with wh.transaction():
        wh.con.execute("INSERT INTO _loads VALUES ($id, 'test', $t, $t, 0, 0, 0)", {"id": load_id, "t": now})
        for table in HELD:
            held = quote(f"held_{part}_{table}")
            wh.con.execute(f"UPDATE {held} SET _load_id = $id", {"id": load_id})
            wh.con.execute(f"INSERT INTO {quote(table)} SELECT * FROM {held}")


def _derived(wh: Warehouse) -> dict[str, pl.DataFrame]:
    names = ["gpu_idle_stretches", *(v.name for v in registry())]
    frames = {}
    for name in names:
        frame = wh.query(f"SELECT * FROM {quote(name)}")
        frames[name] = frame.sort(frame.columns, nulls_last=True)
    return frames


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]]:
    path: Path = tmp_path_factory.mktemp("incremental") / "w.duckdb"
    params = params_from(load_config(overrides={"warehouse.path": str(path)}))
    with Warehouse(path) as wh:
        simulate_into(wh, SIM)
        # Latest cut-off first, so that each part holds only its own rows.
        for part in reversed(range(len(CUTS))):
            _hold_back(wh, CUTS[part], part)
        assert analyze(wh, params).stretches.mode == "full"
        for part, cut in enumerate(CUTS):
            _release(wh, part)
            report = analyze(wh, params)
            assert report.stretches.mode == "incremental"
            assert report.stretches.recomputed_from is not None
            assert START < report.stretches.recomputed_from < cut
        incremental = _derived(wh)
        assert analyze(wh, params, full=True).stretches.mode == "full"
        return incremental, _derived(wh)


def test_the_scenario_crosses_the_cut_offs(
    refreshed: tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]],
) -> None:
    stretches = refreshed[1]["gpu_idle_stretches"]
    for cut in CUTS:
        crossing = stretches.filter((pl.col("start_time") < cut) & (pl.col("end_time") > cut))
        assert crossing.height > 0, f"no idle stretch crosses {cut}: the test would not test the incremental scan"
    assert refreshed[1]["preemption_ledger"].height > 10


@pytest.mark.parametrize("name", ["gpu_idle_stretches", *(v.name for v in registry())])
def test_incremental_refresh_equals_full(
    refreshed: tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]], name: str
) -> None:
    incremental, full = refreshed
    # Sums of doubles may add up in another order between two runs.
    assert_frame_equal(incremental[name], full[name], check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
