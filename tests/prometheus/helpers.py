"""What the Prometheus tests share: a collector from settings, a run into a warehouse, its rows."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from preemptlens.collectors.prometheus import PrometheusCollector, PrometheusSettings, options_from
from preemptlens.warehouse import Warehouse
from tests.prometheus.groundtruth import CLUSTER

KEY = ["host", "gpu_uuid", "gpu_instance", "time"]
ROWS = "SELECT * EXCLUDE (_load_id) FROM gpu_samples ORDER BY host, gpu_uuid, gpu_instance, time"


def ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def collector(
    url: str, since: datetime | None, until: datetime | None, **settings: Any
) -> PrometheusCollector:
    return PrometheusCollector(
        options_from(PrometheusSettings(**{"url": url, "retries": 0, **settings}), CLUSTER),
        None if since is None else ms(since),
        None if until is None else ms(until),
        progress=False,
    )


def run(wh_path: Path, col: PrometheusCollector, stop_after: int | None = None) -> list[tuple[int, int]]:
    """Load the collector's batches; (loaded, unchanged) per batch."""
    reports = []
    with Warehouse(wh_path) as wh:
        for batch in col.batches(wh.watermarks("prometheus")):
            rep = wh.load_batch(batch)
            reports.append((rep.loaded, rep.unchanged))
            if stop_after is not None and len(reports) == stop_after:
                break
    return reports


def table(wh_path: Path) -> pl.DataFrame:
    with Warehouse(wh_path) as wh:
        return wh.query(ROWS)


def watermarks(wh_path: Path) -> dict[tuple[str, str], str]:
    with Warehouse(wh_path) as wh:
        return wh.watermarks("prometheus")
