"""Fixtures: simulated pilots (with their counterfactual runs) loaded and analysed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_scenario import HARMFUL, HELPFUL, Scenario

from preemptlens.warehouse import Warehouse


def _build(path: Path, sc: Scenario, replays: bool = True) -> Path:
    with Warehouse(path) as wh:
        sc.load_into(wh, replays=replays)
    return path


@pytest.fixture(scope="session")
def helpful_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Only evaluated (tests/pilot/test_pilot_ground_truth.py): no replays (Scenario.load_into).
    return _build(tmp_path_factory.mktemp("helpful") / "w.duckdb", HELPFUL, replays=False)


@pytest.fixture(scope="session")
def harmful_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("harmful") / "w.duckdb", HARMFUL)
