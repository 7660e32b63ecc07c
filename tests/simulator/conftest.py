"""One small simulated cluster, scheduled once and loaded once per test session.

64 GPUs for 7 days, busier than the default and with more high-tier work so
that preemptions, final checkpoints, restarts and hoarding all occur.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from preemptlens.analytics.simulator import (
    PolicyConfig,
    PoolSpec,
    SimConfig,
    SimSummary,
    Simulation,
    WorkloadConfig,
    simulate,
    simulate_into,
)
from preemptlens.warehouse import Warehouse

CONFIG = SimConfig(
    cluster="simtest",
    days=7.0,
    pools=(PoolSpec("a100", nodes=6), PoolSpec("h100", nodes=2)),
    workload=WorkloadConfig(seed=11, load=0.95, high_share=0.2, hoarding_share=0.1),
    policy=PolicyConfig(min_run_s=900.0, grace_s=45.0, requeue_hold_s=120.0),
)


@pytest.fixture(scope="session")
def config() -> SimConfig:
    return CONFIG


@pytest.fixture(scope="session")
def simulation() -> Simulation:
    return simulate(CONFIG)


@pytest.fixture(scope="session")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Warehouse, SimSummary]]:
    path: Path = tmp_path_factory.mktemp("sim") / "sim.duckdb"
    with Warehouse(path) as wh:
        yield wh, simulate_into(wh, CONFIG)


@pytest.fixture(scope="session")
def wh(loaded: tuple[Warehouse, SimSummary]) -> Warehouse:
    return loaded[0]
