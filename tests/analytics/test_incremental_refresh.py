"""An incremental `analyze` after new data must leave every derived table as a full one does.

The simulator writes a few days of a cluster with hoarders; the last part of
it (samples, jobs, runs, checkpoints from a cut-off on) is held back and then
loaded in two later loads, each followed by an incremental analyze. Stretches
that cross the cut-offs are the case the incremental scan must get right. The
second load also corrects a run that ended long before the cut-offs (a later
end): a figure of an earlier preemption that depends on it must follow.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import DEMO, PoolSpec, SimConfig, simulate_into
from preemptlens.analytics.views import registry
from preemptlens.config import load_config
from preemptlens.warehouse import Warehouse, quote

START = datetime(2026, 10, 5, tzinfo=UTC)
SIM = SimConfig(
    cluster="incr",
    start=START,
    days=4.0,
    pools=(PoolSpec("a100", nodes=6),),
    workload=dataclasses.replace(DEMO.workload, seed=5, load=0.95, hoarding_share=0.25),
    # The correction below needs a first-day preemption whose counterfactual start is another run's end, which
    # this seed has under greedy backfill (with reservations it has none).
    policy=dataclasses.replace(DEMO.policy, backfill="greedy"),
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


def _release(wh: Warehouse, part: int) -> tuple[str, int, datetime] | None:
    """Put a held-back part back as one new load, as a collector would; the last also corrects a run."""
    load_id = uuid.uuid4().hex
    now = datetime.now(UTC)
    with wh.transaction():
        wh.con.execute("INSERT INTO _loads VALUES ($id, 'test', $t, $t, 0, 0, 0)", {"id": load_id, "t": now})
        for table in HELD:
            held = quote(f"held_{part}_{table}")
            wh.con.execute(f"UPDATE {held} SET _load_id = $id", {"id": load_id})
            wh.con.execute(f"INSERT INTO {quote(table)} SELECT * FROM {held}")
        return _correct_early_run(wh, load_id) if part == len(CUTS) - 1 else None


def _correct_early_run(wh: Warehouse, load_id: str) -> tuple[str, int, datetime]:
    """A source re-sends a run of the first day with a later end, as sacct does after a correction.

    The run is the one whose end let a preemptor start in the counterfactual, so that
    preemption_gains (and the ledger and net benefit after it) change days before the new data.
    Returns that preemptor's run and its counterfactual start before the correction.
    """
    ((job_id, run, preemptor_job_id, preemptor_run, before),) = wh.con.execute(
        """
        SELECT r.job_id, r.run, g.preemptor_job_id, g.preemptor_run, g.counterfactual_start
        FROM preemption_gains AS g
        JOIN job_runs AS r ON r.cluster = g.cluster AND r.end_time = g.counterfactual_start AND r.pool = g.pool
        WHERE NOT g.gain_censored AND g.counterfactual_start > g.time AND g.time < $day
        ORDER BY g.time, r.job_id, r.run
        LIMIT 1
        """,
        {"day": START + timedelta(days=1)},
    ).fetchall()
    wh.con.execute(
        "UPDATE job_runs SET end_time = end_time + INTERVAL 40 MINUTE, _load_id = $id "
        "WHERE cluster = $c AND job_id = $j AND run = $r",
        {"id": load_id, "c": SIM.cluster, "j": job_id, "r": run},
    )
    return preemptor_job_id, preemptor_run, before


def _derived(wh: Warehouse) -> dict[str, pl.DataFrame]:
    names = ["gpu_idle_stretches", *(v.name for v in registry())]
    frames = {}
    for name in names:
        frame = wh.query(f"SELECT * FROM {quote(name)}")
        frames[name] = frame.sort(frame.columns, nulls_last=True)
    return frames


class Refreshed(NamedTuple):
    incremental: dict[str, pl.DataFrame]
    full: dict[str, pl.DataFrame]
    corrected: tuple[str, int, datetime]  # a preemptor run, and its counterfactual start before the correction


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory: pytest.TempPathFactory) -> Refreshed:
    path: Path = tmp_path_factory.mktemp("incremental") / "w.duckdb"
    params = load_config(overrides={"warehouse.path": str(path)}).of(AnalyticsSettings)
    with Warehouse(path) as wh:
        simulate_into(wh, SIM)
        # Latest cut-off first, so that each part holds only its own rows.
        for part in reversed(range(len(CUTS))):
            _hold_back(wh, CUTS[part], part)
        assert analyze(wh, params).stretches.mode == "full"
        corrected = None
        for part, cut in enumerate(CUTS):
            corrected = _release(wh, part) or corrected
            report = analyze(wh, params)
            assert report.stretches.mode == "incremental"
            assert report.stretches.recomputed_from is not None
            assert START < report.stretches.recomputed_from < cut
        incremental = _derived(wh)
        assert analyze(wh, params, full=True).stretches.mode == "full"
        assert corrected is not None
        return Refreshed(incremental, _derived(wh), corrected)


def test_the_scenario_crosses_the_cut_offs(refreshed: Refreshed) -> None:
    stretches = refreshed.full["gpu_idle_stretches"]
    for cut in CUTS:
        crossing = stretches.filter((pl.col("start_time") < cut) & (pl.col("end_time") > cut))
        assert crossing.height > 0, f"no idle stretch crosses {cut}: the test would not test the incremental scan"
    assert refreshed.full["preemption_ledger"].height > 10


def test_the_corrected_run_changes_an_early_gain(refreshed: Refreshed) -> None:
    preemptor_job_id, preemptor_run, before = refreshed.corrected
    gains = refreshed.full["preemption_gains"].filter(
        (pl.col("preemptor_job_id") == preemptor_job_id) & (pl.col("preemptor_run") == preemptor_run)
    )
    assert gains.height == 1
    assert gains["counterfactual_start"].item() != before, "the correction would not test the early rows"


@pytest.mark.parametrize("name", ["gpu_idle_stretches", *(v.name for v in registry())])
def test_incremental_refresh_equals_full(refreshed: Refreshed, name: str) -> None:
    incremental, full, _ = refreshed
    # Sums of doubles may add up in another order between two runs.
    assert_frame_equal(incremental[name], full[name], check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
