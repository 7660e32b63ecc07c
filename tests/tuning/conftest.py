"""Simulated clusters shared by the tuning tests: each is built once per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sim_cluster import Clusters, default_settings

from preemptlens.analytics.whatif.tuning import Context, context, suggest


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
