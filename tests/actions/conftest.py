"""A fresh warehouse per test, with the hand-made world the actions engine reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from actions_world import World

from preemptlens.warehouse import Warehouse


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        yield World(wh)
