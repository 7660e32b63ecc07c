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
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from preemptlens.dashboards import metrics
from preemptlens.dashboards.metrics import PER_PEER, MetricsServer, SnapshotCollector
from preemptlens.errors import ConfigError
from preemptlens.peers import Peer
from preemptlens.readonly import Limits, query
from tests.local_user import NOBODY, connections_of_another_user
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


def wait_until(condition: Callable[[], bool], what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.1)


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
        # Beyond the cap, a connection is answered 503 and closed at once: its descriptor is freed here too.
        surplus = idle[-1]
        surplus.settimeout(60)
        assert surplus.recv(100).startswith(b"HTTP/1.0 503")
        assert surplus.recv(100) == b"", "closed after the 503"
        # This process holds the 300 client ends; the server's side holds at most the cap (+ its own).
        server_side = open_fds() - before - len(idle)
        assert server_side <= 8 + 4, server_side
        # The idle ones are cut at HEADER_TIMEOUT_S: wait until the server holds none of them.
        wait_until(lambda: not server.server.shares.held(), "the idle connections closed", 120)
        # A client dripping its request a byte at a time is cut off at HEADER_TIMEOUT_S like a quiet one.
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
        # Its whole request would take 24 s; it is cut at 2 s (and a loaded machine's few seconds more).
        assert cut_after < 15, f"a dripping client was served for {cut_after:.1f} s"
        assert requests.get(f"{url}/metrics", timeout=30).status_code == 200
    finally:
        for connection in idle:
            connection.close()
        server.stop()


def test_a_unix_socket_listener(warehouse: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o750)
    path = folder / "metrics.sock"
    path.touch()  # a file where the socket goes is not a socket: left alone, and refused
    with pytest.raises(ConfigError, match="exists and is not a socket"):
        MetricsServer(SnapshotCollector(warehouse), f"unix:{path}", 0)
    assert path.is_file()
    path.unlink()
    server = MetricsServer(SnapshotCollector(warehouse, cache_s=0.0), f"unix:{path}", 0, token=TOKEN)
    try:
        assert path.is_socket() and path.stat().st_mode & 0o777 == 0o660
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(path))
        # Its peer is the user the kernel names (SO_PEERCRED), whose share it counts against.
        wait_until(lambda: server.server.shares.held() == {Peer(uid=os.geteuid()): 1}, "the peer counted", 60)
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
        deadline = time.monotonic() + 120
        while loads_now(tmp_path) < loads + 2 and time.monotonic() < deadline and serve.poll() is None:
            time.sleep(0.5)
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


HALF_SENT = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: "


def test_one_local_users_half_sent_connections_leave_prometheus_its_turn(warehouse: Path) -> None:
    """Forty half-sent connections of another local user, reopened as they close: that user holds PER_PEER of
    the listener's connections, and every scrape of this user is answered throughout."""
    server, url = serve_on(warehouse, None)
    port = int(url.rsplit(":", 1)[1])
    with connections_of_another_user(port, 40, HALF_SENT) as uid:
        attacker = Peer(uid=uid)
        try:
            wait_until(lambda: server.server.shares.held().get(attacker) == PER_PEER, "the attacker at its share", 60)
            scrapes, end = 0, time.monotonic() + 20
            while time.monotonic() < end:
                began = time.monotonic()
                answer = requests.get(f"{url}/metrics", timeout=30)
                assert answer.status_code == 200, answer.text
                # Never refused nor queued behind the attacker (the control below is refused at once); the bound
                # is generous for a loaded machine (a load of 20 on 2 cores made a scrape take 22 s).
                assert time.monotonic() - began < 60, "a scrape waited behind the attacker"
                assert server.server.shares.held().get(attacker, 0) <= PER_PEER
                scrapes += 1
            assert scrapes >= 5
        finally:
            server.stop()


def test_without_a_share_per_peer_the_same_attack_keeps_prometheus_out(warehouse: Path) -> None:
    """The control: with one cap on all connections (as before), the same user takes them all."""
    server, url = serve_on(warehouse, None, per_peer=metrics.MAX_CONNECTIONS)
    port = int(url.rsplit(":", 1)[1])
    with connections_of_another_user(port, 40, HALF_SENT) as uid:
        try:
            wait_until(lambda: server.server.shares.held().get(Peer(uid=uid)) == metrics.MAX_CONNECTIONS,
                       "the attacker holding every connection", 60)
            assert requests.get(f"{url}/metrics", timeout=30).status_code == 503
        finally:
            server.stop()


def test_a_unix_socket_in_a_folder_others_can_write_or_not_ours_is_refused(warehouse: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: another user binds the name first and receives the bearer token
    with pytest.raises(ConfigError, match="others can write"):
        MetricsServer(SnapshotCollector(warehouse), f"unix:{shared / 'metrics.sock'}", 0, token=TOKEN)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY.pw_uid, NOBODY.pw_gid)
    with pytest.raises(ConfigError, match="belongs to another user"):
        MetricsServer(SnapshotCollector(warehouse), f"unix:{theirs / 'metrics.sock'}", 0, token=TOKEN)
    # A link of another user on the way to our own folder: they could point it elsewhere later.
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    link = shared / "run"
    link.symlink_to(ours)
    os.lchown(link, NOBODY.pw_uid, NOBODY.pw_gid)
    with pytest.raises(ConfigError, match="is a link of another user"):
        MetricsServer(SnapshotCollector(warehouse), f"unix:{link / 'metrics.sock'}", 0, token=TOKEN)
    # A socket someone else left where ours goes (root put it in our folder for them): not taken over.
    planted = socket.socket(socket.AF_UNIX)
    planted.bind(str(ours / "metrics.sock"))
    os.chown(ours / "metrics.sock", NOBODY.pw_uid, NOBODY.pw_gid)
    try:
        with pytest.raises(ConfigError, match="a socket of another user"):
            MetricsServer(SnapshotCollector(warehouse), f"unix:{ours / 'metrics.sock'}", 0, token=TOKEN)
    finally:
        planted.close()
    # A folder that does not exist yet is made private.
    made = tmp_path / "made" / "run"
    server = MetricsServer(SnapshotCollector(warehouse), f"unix:{made / 'metrics.sock'}", 0, token=TOKEN)
    try:
        assert made.stat().st_mode & 0o777 == 0o700 and (made / "metrics.sock").is_socket()
    finally:
        server.stop()
