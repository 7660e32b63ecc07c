"""Fixtures: the hand-made cluster (exact ground truth) and a simulated one (realistic volume)."""

from __future__ import annotations

import os
from pathlib import Path

import fixture_cluster
import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import DEMO, simulate_into
from preemptlens.config import load_config
from preemptlens.warehouse import Warehouse


@pytest.fixture(scope="session")
def cluster_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fixture_cluster.build(tmp_path_factory.mktemp("cluster") / "w.duckdb")


@pytest.fixture(scope="session")
def sim_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo cluster (64 GPUs, 14 days) simulated with ground truth and analysed."""
    path = tmp_path_factory.mktemp("sim") / "w.duckdb"
    with Warehouse(path) as wh:
        simulate_into(wh, DEMO)
        analyze(wh, load_config(None).of(AnalyticsSettings))
    return path


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the browser tests leave their screenshots: $PREEMPTLENS_SCREENSHOTS, else a temporary folder."""
    folder = Path(os.environ.get("PREEMPTLENS_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
