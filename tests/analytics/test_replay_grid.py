"""The replay places idle stretches on the record's own GPU sample grid.

The record's idle stretches begin on its samples: the wall clock's multiples of the exporter's step (or a range
query's grid). The replay's time 0 is the window's first submission, which falls between samples. An engine that
counted its grid from there moved every hoarder's idle stretches by up to a step, and through them checkpoints,
run ends and who is preempted when: the README's demo missed its own simulated window by 21.5%
(benchmarks/bench_replay_truth.py). Ground truth: the demo's cluster simulated, its grid known from its settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import simulate_into
from preemptlens.analytics.simulator.model import SimConfig
from preemptlens.analytics.whatif.replay import (
    Variant,
    Workload,
    default_window,
    load_workload,
    run_variant,
    validation,
)
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.commands.demo import demo_config
from preemptlens.warehouse import Warehouse

# A week of the demo's cluster whose first submission falls 49 s after a sample (seed 7): off the grid.
WEEK = datetime(2026, 12, 7, 12, tzinfo=UTC)


@pytest.fixture(scope="module", params=[60, 300], ids=["step 60 s", "step 300 s"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[SimConfig, Warehouse, Workload]]:
    config = dataclasses.replace(demo_config(7, 256, 7, WEEK), sample_step_s=request.param)
    with Warehouse(Path(tmp_path_factory.mktemp("grid")) / "w.duckdb") as wh:
        simulate_into(wh, config)
        analyze(wh, AnalyticsSettings(), tuning=TuningSettings(jitter_replays=0, processes=1))
        yield config, wh, load_workload(wh, default_window(wh, config.cluster), TuningSettings())


def test_the_replay_reads_the_sample_grid_from_the_record(recorded: tuple[SimConfig, Warehouse, Workload]) -> None:
    config, _, workload = recorded
    step = config.sample_step_s
    assert workload.grid_s == step
    # the simulator samples on multiples of its step from its start: in replay time, from the window's start
    origin = (config.start - workload.window.start).total_seconds() % step
    assert workload.grid_origin_s == pytest.approx(origin, abs=1e-6)
    assert 0 < workload.grid_origin_s < step  # the case this test is for: the window starts between samples


def test_the_replay_on_the_records_grid_reproduces_its_window(recorded: tuple[SimConfig, Warehouse, Workload]
                                                               ) -> None:
    config, wh, workload = recorded
    tolerance = TuningSettings().validation_tolerance

    def checked(w: Workload) -> tuple[bool, float]:
        replayed = run_variant(w, Variant("in force", config.policy))
        plain = run_variant(w, Variant("none", dataclasses.replace(config.policy, enabled=False)))
        result = validation(wh, w, replayed, (plain,), tolerance)
        worst = max((c.error for c in result.checks if c.decides and c.error is not None), default=0.0)
        return result.ok, worst

    ok, worst = checked(workload)
    assert ok, f"the replay on the record's grid misses its window by {worst:.1%}"
    # the grid counted from the replay's origin, as before: the same window is missed
    ok, worst = checked(dataclasses.replace(workload, grid_s=60.0, grid_origin_s=0.0))
    assert not ok and worst > tolerance, worst
