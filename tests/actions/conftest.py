"""A fresh warehouse per test with the hand-made world the actions engine reads, and the fake
Kubernetes API server (tests/kubernetes/k8s_fake.py) the effectors patch."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from actions_world import World

from preemptlens.warehouse import Warehouse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kubernetes"))

from k8s_fake import api  # noqa: F401 (the fixture; found through the path above)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        yield World(wh)
