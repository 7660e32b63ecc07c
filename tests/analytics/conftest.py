"""Fixtures: a fresh warehouse per test and a scenario builder on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from analytics_scenario import Scenario

from preemptlens.warehouse import Warehouse


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse(tmp_path / "w.duckdb") as warehouse:
        yield warehouse


@pytest.fixture
def sc(wh: Warehouse) -> Scenario:
    return Scenario(wh)
