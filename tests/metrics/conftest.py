"""A simulated, analysed warehouse; `preemptlens serve` exposing it; a real Prometheus scraping serve.

The simulated cluster has more teams (9) than the test's `metrics.top_teams`
(3), so the folding into team="_other" is exercised. After the analysis one
more load (a collector's watermark) is committed, so serve's own analyze job
has something to take in and the freshness metrics change while Prometheus
watches.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import simulate_into
from preemptlens.analytics.simulator.model import PoolSpec, SimConfig, TeamSpec, WorkloadConfig
from preemptlens.config import load_config
from preemptlens.contract import Batch, Watermark
from preemptlens.warehouse import Warehouse
from tests.metrics.metrics_e2e import CLUSTER, TEAMS, TOKEN, TOP_TEAMS, WEBHOOK, Scraped
from tests.prometheus.conftest import PrometheusServer, free_port


@pytest.fixture(scope="session")
def analysed_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Nine days from a Monday (one complete ISO week and a partial one), two pools, nine teams."""
    path = tmp_path_factory.mktemp("metrics") / "w.duckdb"
    teams = tuple(TeamSpec(f"team{i:02d}", 1.0 + i % 3, high_share_growth=0.05 if i < 2 else 0.0) for i in range(TEAMS))
    config = SimConfig(
        cluster=CLUSTER,
        days=9.0,
        pools=(PoolSpec("a100", nodes=3), PoolSpec("h100", nodes=2)),
        workload=WorkloadConfig(teams=teams),
    )
    with Warehouse(path) as wh:
        simulate_into(wh, config)
        analyze(wh, load_config(None).of(AnalyticsSettings))
        wh.load_batch(Batch(source="probe", watermarks=[Watermark("probe", CLUSTER, "jobs", "42")]))
        wh.publish()
    return path


def _wait(what: str, predicate: Any, timeout: float, serve: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            raise AssertionError(f"serve exited with {serve.returncode} while waiting for {what}")
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout} s")


@pytest.fixture(scope="session")
def scraped(analysed_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    root = tmp_path_factory.mktemp("metrics-e2e")
    port = free_port()
    config = root / "serve.toml"
    config.write_text(
        f'[warehouse]\npath = "{analysed_warehouse}"\n'
        '[serve]\njobs = ["analyze"]\nanalyze_interval_s = 3600.0\n'
        f'metrics_port = {port}\nmetrics_address = "127.0.0.1"\n'
        f"[metrics]\ntop_teams = {TOP_TEAMS}\ncache_s = 1.0\n"
        '[prometheus]\nurl = "http://127.0.0.1:1"\nbearer_token = { "$env" = "METRICS_TEST_TOKEN" }\n'
    )
    env = {**os.environ, "METRICS_TEST_TOKEN": TOKEN, "PREEMPTLENS_ALERTS__WEBHOOK_URL": WEBHOOK}
    log_path = root / "serve.log"
    with log_path.open("w") as log:
        serve = subprocess.Popen(
            [sys.executable, "-m", "preemptlens.cli", "--config", str(config), "serve", "--no-dashboard"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    data = root / "prom-data"
    data.mkdir()
    prometheus = PrometheusServer(
        data,
        config_text=(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: preemptlens\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    try:
        prometheus.start()

        def final_figures_scraped() -> bool:
            # serve's analyze took in the extra load and published; a scrape after that has been stored.
            at = time.time()
            answer = requests.get(
                f"{prometheus.url}/api/v1/query",
                params={"query": "preemptlens_unanalyzed_loads == 0 and on() preemptlens_snapshot_readable == 1",
                        "time": at},
                timeout=5,
            ).json()
            return answer["status"] == "success" and bool(answer["data"]["result"])

        _wait("Prometheus holding serve's figures after its analyze", final_figures_scraped, 90, serve)
        at = time.time()
        exposition = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        # The instant queries look back from `at`: wait for a scrape stored after it, however long load makes
        # Prometheus take, so that `at` lies within the data.

        def scraped_after_at() -> bool:
            answer = requests.get(f"{prometheus.url}/api/v1/query",
                                  params={"query": "timestamp(preemptlens_snapshot_readable)"}, timeout=5).json()
            result = answer["data"]["result"] if answer["status"] == "success" else []
            return bool(result) and float(result[0]["value"][1]) > at

        _wait("a scrape after the exposition was read", scraped_after_at, 90, serve)
        serve.send_signal(signal.SIGTERM)
        status = serve.wait(timeout=60)
        yield Scraped(prometheus, analysed_warehouse, at, exposition, status, log_path.read_text())
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        prometheus.stop()
