"""Simulated clusters shared by the tuning tests: each is built once per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sim_cluster import build, sim_config

from analytics.replay import Window
from analytics.tuning import SETTINGS, Context, context, suggest
from preemptlens.warehouse import Warehouse

# High churn: many short jobs and many high-tier arrivals, so two days show enough preemptions.
CHURN: dict[str, Any] = {"gpus": 64, "load": 1.3, "high_share": 0.3, "work_median_s": 1800.0}


def default_settings(**overrides: Any) -> dict[str, Any]:
    values = {s.key: s.default for s in SETTINGS.settings}
    values["processes"] = 2
    values.update(overrides)
    return values


class Clusters:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, tuple[Warehouse, Window]] = {}

    def get(self, name: str, *, samples: bool = False, **kwargs: Any) -> tuple[Warehouse, Window]:
        if name not in self.built:
            sim = sim_config(**kwargs)
            wh = build(self.root / f"{name}.duckdb", sim, samples=samples)
            self.built[name] = (wh, Window("sim", sim.start, sim.start + timedelta(seconds=sim.horizon_s)))
        return self.built[name]

    def close(self) -> None:
        # The files are thrown away: neither a reader snapshot (Warehouse.close publishes one) nor a
        # checkpoint of the database file is worth its minute at the end of the session.
        for wh, _ in self.built.values():
            wh.con.execute("PRAGMA disable_checkpoint_on_shutdown")
            wh.con.close()


@pytest.fixture(scope="session")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    found = Clusters(tmp_path_factory.mktemp("tuning"))
    yield found
    found.close()


@pytest.fixture(scope="session")
def suggestions_for(clusters: Clusters) -> Callable[..., tuple[Context, list[Any]]]:
    cache: dict[str, tuple[Context, list[Any]]] = {}

    def run(name: str, *, samples: bool = False, settings: dict[str, Any] | None = None, **kwargs: Any
            ) -> tuple[Context, list[Any]]:
        if name not in cache:
            wh, window = clusters.get(name, samples=samples, **kwargs)
            ctx = context(wh, window, default_settings(**(settings or {})))
            cache[name] = (ctx, suggest(ctx))
        return cache[name]

    return run
