"""The /metrics listener on a shared machine, over real sockets: no job ids to a client without the token,
only the Host names it serves, and idle, slow or too many connections cannot take its threads or serve's file
descriptors (a real `preemptlens serve` keeps collecting and publishing under 300 idle connections)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from preemptlens.dashboards import metrics
from preemptlens.dashboards.metrics import MetricsServer, SnapshotCollector
from preemptlens.readonly import Limits, query
from tests.metrics.test_live_costs_http import AUTH, TOKEN, seed
from tests.prometheus.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "w.duckdb"
    seed(path)
    return path


def serve_on(warehouse: Path, token: str | None, **kwargs: object) -> tuple[MetricsServer, str]:
    port = free_port()
    server = MetricsServer(SnapshotCollector(warehouse, cache_s=0.0, top_jobs=2), "127.0.0.1", port, token=token,
                           **kwargs)  # type: ignore[arg-type]
    return server, f"http://127.0.0.1:{port}"


def test_without_a_token_metrics_are_aggregates_and_live_costs_refused(warehouse: Path) -> None:
    server, url = serve_on(warehouse, None)
    try:
        text = requests.get(f"{url}/metrics", timeout=10).text
        assert "preemptlens_live_cost_gpu_hours_count" in text, "the aggregates are served"
        for job in ("j1", "j2", "j3", "j5"):
            assert f'"{job}"' not in text
        assert "job_id" not in text and "preemptlens_live_cost_top_gpu_hours" not in text
        refused = requests.get(f"{url}/live-costs", timeout=10)
        assert refused.status_code == 403 and "serve.metrics_token" in refused.json()["error"]
        assert "j3" not in refused.text
    finally:
        server.stop()


def test_with_a_token_every_request_must_send_it(warehouse: Path) -> None:
    server, url = serve_on(warehouse, TOKEN)
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}):
            for path in ("/metrics", "/live-costs"):
                answer = requests.get(f"{url}{path}", headers=headers, timeout=10)
                assert answer.status_code == 401 and "j3" not in answer.text, (path, headers)
        assert 'job_id="j3"' in requests.get(f"{url}/metrics", headers=AUTH, timeout=10).text
        assert requests.get(f"{url}/live-costs", headers=AUTH, timeout=10).json()["jobs"][0]["job_id"] == "j3"
    finally:
        server.stop()


def test_a_foreign_host_name_gets_nothing(warehouse: Path) -> None:
    server, url = serve_on(warehouse, TOKEN, public_host="preemptlens.example.org")
    try:
        for host in ("attacker.example", "127.0.0.1.nip.io", "localhost.attacker.example:9464"):
            answer = requests.get(f"{url}/live-costs", headers={**AUTH, "Host": host}, timeout=10)
            assert answer.status_code == 403 and "j3" not in answer.text, host
        for host in ("localhost", f"127.0.0.1:{url.rsplit(':', 1)[1]}", "preemptlens.example.org", "[::1]:9464"):
            assert requests.get(f"{url}/live-costs", headers={**AUTH, "Host": host}, timeout=10).status_code == 200
    finally:
        server.stop()


def open_fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_idle_slow_and_surplus_connections_are_bounded(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "HEADER_TIMEOUT_S", 2.0)
    monkeypatch.setattr(metrics._Handler, "timeout", 2.0)
    server, url = serve_on(warehouse, None, max_connections=8)
    port = int(url.rsplit(":", 1)[1])
    before = open_fds()
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
    try:
        time.sleep(0.5)
        # Beyond the cap, a connection is answered 503 and closed at once: its descriptor is freed here too.
        surplus = idle[-1]
        surplus.settimeout(5)
        assert surplus.recv(100).startswith(b"HTTP/1.0 503")
        assert surplus.recv(100) == b"", "closed after the 503"
        # This process holds the 300 client ends; the server's side holds at most the cap (+ its own).
        server_side = open_fds() - before - len(idle)
        assert server_side <= 8 + 4, server_side
        # A client dripping its request a byte at a time is cut off at HEADER_TIMEOUT_S like a quiet one.
        time.sleep(2.5)
        drip = socket.create_connection(("127.0.0.1", port))
        began = time.monotonic()
        try:
            for byte in b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100:
                drip.send(bytes([byte]))
                time.sleep(0.2)
        except OSError:
            pass
        cut_after = time.monotonic() - began
        drip.close()
        assert cut_after < 5, f"a dripping client was served for {cut_after:.1f} s"
        # The idle ones were closed at IDLE_TIMEOUT_S: a scrape is answered again.
        assert requests.get(f"{url}/metrics", timeout=10).status_code == 200
    finally:
        for connection in idle:
            connection.close()
        server.stop()


def test_a_unix_socket_listener(warehouse: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o750)
    path = folder / "metrics.sock"
    path.touch()  # a stale file where the socket goes is not a socket: left alone, and the bind says so
    with pytest.raises(OSError):
        MetricsServer(SnapshotCollector(warehouse), f"unix:{path}", 0)
    path.unlink()
    server = MetricsServer(SnapshotCollector(warehouse, cache_s=0.0), f"unix:{path}", 0, token=TOKEN)
    try:
        assert path.is_socket() and path.stat().st_mode & 0o777 == 0o660
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(path))
        client.sendall(f"GET /live-costs HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        client.close()
        assert answer.startswith(b"HTTP/1.0 200") and b'"j3"' in answer
    finally:
        server.stop()
    assert not path.exists(), "the socket is removed when serve stops"


def test_serve_keeps_collecting_and_publishing_under_300_idle_connections(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[warehouse]\npath = "{tmp_path / "w.duckdb"}"\n'
        f'[serve]\njobs = ["collect"]\ncollect = ["serve_probe_source --rows 3 --batches 1"]\n'
        f"collect_interval_s = 1\nmetrics_port = {port}\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "people"), str(ROOT)])}

    def few_files() -> None:
        # Without the listener's cap, 300 connections alone would use up a limit of 200 descriptors.
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))

    serve = subprocess.Popen([sys.executable, "-m", "preemptlens.cli", "--config", str(config), "serve",
                              "--no-dashboard"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, preexec_fn=few_files)
    idle: list[socket.socket] = []
    try:
        snapshot = tmp_path / "w.duckdb.snapshot"
        deadline = time.monotonic() + 60
        while not snapshot.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        for _ in range(300):
            try:
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                break
        loads = loads_now(tmp_path)
        time.sleep(4)
        assert loads_now(tmp_path) >= loads + 2, "collection and the snapshot publish went on"
        assert open_fds(serve.pid) < 120, "serve's own descriptors stay few"
    finally:
        for connection in idle:
            connection.close()
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=30)
    assert serve.returncode == 0, out
    assert "Too many open files" not in out and "failed" not in out, out


def loads_now(tmp_path: Path) -> int:
    return int(query(tmp_path / "w.duckdb", "SELECT count(*) FROM _loads", Limits(wait_s=5)).frame.item())
