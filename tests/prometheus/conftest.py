"""A real Prometheus 2.42 (Debian package) on 127.0.0.1, backfilled with promtool.

The session fixture writes the ground-truth history as dcgm-exporter
OpenMetrics, turns it into TSDB blocks with `promtool tsdb create-blocks-from
openmetrics` and starts Prometheus on a free port with a long retention (the
default 15 d would delete backfilled blocks older than that at start-up).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
import requests

from tests.prometheus.groundtruth import STYLES, history_end, raw_samples
from tests.prometheus.helpers import collector, run
from tests.prometheus.openmetrics import write_openmetrics

HISTORY_HOURS = 12

if shutil.which("prometheus") is None or shutil.which("promtool") is None:
    pytest.skip(
        "the Debian package `prometheus` is not installed (tests/run.sh installs it)", allow_module_level=True
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def backfill(openmetrics: Path, data_dir: Path, max_block: str = "24h") -> None:
    # Default 2 h blocks make promtool several times slower on days of history.
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            f"--max-block-duration={max_block}",
            str(openmetrics),
            str(data_dir),
        ],
        check=True,
        capture_output=True,
    )


@dataclass
class PrometheusServer:
    data_dir: Path
    config_text: str = "global:\n  scrape_interval: 15s\n"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        config = self.data_dir.parent / f"prometheus-{self.port}.yml"
        config.write_text(self.config_text)
        log = (self.data_dir.parent / f"prometheus-{self.port}.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir}",
                "--storage.tsdb.retention.time=3650d",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=log,
            stderr=log,
        )
        # Ready in a second on a quiet machine; a generous deadline for a busy one (it replays its WAL first).
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}; see {log.name}")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=5).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"prometheus on port {self.port} not ready after 300 s; see {log.name}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@dataclass(frozen=True)
class History:
    raw: pl.DataFrame
    first: datetime  # first and last step of the history
    last: datetime
    blocks: Path  # backfilled TSDB blocks, to copy for a server of one's own


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    root = tmp_path_factory.mktemp("prom-history")
    end = history_end()
    raw = raw_samples(end, HISTORY_HOURS)
    om = root / "dcgm.om.txt"
    write_openmetrics(raw, om, STYLES)
    backfill(om, root / "blocks")
    first = end - timedelta(hours=HISTORY_HOURS) + timedelta(minutes=1)
    return History(raw=raw, first=first, last=end, blocks=root / "blocks")


@pytest.fixture(scope="session")
def prometheus(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    data = tmp_path_factory.mktemp("prom-shared") / "data"
    shutil.copytree(history.blocks, data)
    server = PrometheusServer(data)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_prometheus(history: History, tmp_path: Path) -> Iterator[PrometheusServer]:
    """A server this test may stop and start, on a copy of the history."""
    data = tmp_path / "data"
    shutil.copytree(history.blocks, data)
    server = PrometheusServer(data)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def reference(
    history: History, prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """One uninterrupted collection of the whole history, in many pages."""
    path = tmp_path_factory.mktemp("reference") / "w.duckdb"
    run(path, collector(prometheus.url, history.first, history.last, page_points=97))
    return path
