"""serve's /metrics endpoint: on when a port is set, off with 0, and a busy port does not stop serve."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
import requests

from preemptlens.commands.serve import Server
from preemptlens.config import load_config
from tests.prometheus.conftest import free_port


def server(tmp_path: Path, port: int) -> Server:
    path = tmp_path / "serve.toml"
    path.write_text(
        f'[warehouse]\npath = "{tmp_path / "w.duckdb"}"\n'
        f'[serve]\nmetrics_port = {port}\nmetrics_address = "127.0.0.1"\n'
    )
    return Server(load_config(str(path)), dashboard=False)


def test_port_zero_turns_metrics_off(tmp_path: Path) -> None:
    assert server(tmp_path, 0).start_metrics() is None


def test_metrics_answer_then_stop_frees_the_port(tmp_path: Path) -> None:
    port = free_port()
    metrics = server(tmp_path, port).start_metrics()
    assert metrics is not None
    try:
        answer = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert answer.status_code == 200
        # No warehouse yet: the endpoint says so instead of failing the scrape.
        assert "preemptlens_snapshot_readable 0.0" in answer.text
    finally:
        metrics.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_busy_port_is_logged_and_serve_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with caplog.at_level(logging.ERROR, logger="preemptlens.serve"):
            assert server(tmp_path, port).start_metrics() is None
    assert f"metrics: cannot listen on 127.0.0.1:{port}" in caplog.text
