"""`preemptlens serve` and `preemptlens dashboard` with no address configured, as a platform team starts
them: the dashboards and /metrics listen on 127.0.0.1 only (`ss -ltnp`), a WebSocket naming a foreign
Host is refused even with a matching Origin (DNS rebinding), and no process of them opens a connection or
looks up a name beyond this host, from start through a reader's first page and a cross-origin WebSocket
(a Python audit hook records them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import websocket
from browser import Chromium, free_port, wait_http

from preemptlens.commands.dashboard import options
from preemptlens.config import load_config
from preemptlens.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

# Loaded by every Python process of serve (sitecustomize on PYTHONPATH): each socket connect and name
# lookup, with the process id, goes to $NETWORK_LOG.
AUDIT = """
import json, os, sys

_log = os.environ["NETWORK_LOG"]


def _write(event, target):
    with open(_log, "a") as out:
        out.write(json.dumps({"event": event, "target": target, "pid": os.getpid()}) + "\\n")


def _hook(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        _write(event, repr(args[1] if event == "socket.connect" else args[0]))


sys.addaudithook(_hook)
# Proof that the hook watches this process, whether or not it ever connects (a server that binds without a
# name lookup, as Streamlit on uvicorn does, makes no event at all).
_write("hooked", None)
"""


@dataclass
class Served:
    dashboard_port: int
    metrics_port: int
    listeners: list[tuple[str, int]]
    network_log: Path
    pids: set[int]
    alone_port: int  # of `preemptlens dashboard`
    alone_listeners: list[tuple[str, int]]


def descendants(pid: int) -> set[int]:
    found = {pid}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found |= descendants(int(stat.parent.name))
    return found


def listening(pids: set[int]) -> list[tuple[str, int]]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            local = line.split()[3]
            address, port = local.rsplit(":", 1)
            found.append((address.strip("[]"), int(port)))
    return found


@pytest.fixture(scope="module")
def served(cluster_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("listen")
    warehouse = root / "w.duckdb"
    shutil.copy(cluster_warehouse, warehouse)
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(AUDIT)
    dashboard_port, metrics_port = free_port(), free_port()
    config = root / "preemptlens.toml"
    # No address anywhere: the defaults are what is tested.
    config.write_text(
        f'[warehouse]\npath = "{warehouse}"\n'
        f'[serve]\njobs = ["alerts", "dashboard"]\nalerts_interval_s = 3600.0\n'
        f"metrics_port = {metrics_port}\n[dashboard]\nport = {dashboard_port}\n"
    )
    network_log = root / "network.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
    # The tree under test after the audit hook: without it, serve would run whatever preemptlens is installed.
    env.update(PYTHONPATH=os.pathsep.join([str(root / "site"), str(ROOT)]), NETWORK_LOG=str(network_log))
    alone_port = free_port()
    with (root / "serve.log").open("w") as log:
        serve = subprocess.Popen([sys.executable, "-m", "preemptlens.cli", "--config", str(config), "serve"],
                                 cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    with (root / "dashboard.log").open("w") as log:
        alone = subprocess.Popen([sys.executable, "-m", "preemptlens.cli", "--config", str(config), "dashboard",
                                  "--port", str(alone_port)], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{dashboard_port}/_stcore/health", 90)
        wait_http(f"http://127.0.0.1:{metrics_port}/metrics", 30)
        wait_http(f"http://127.0.0.1:{alone_port}/_stcore/health", 90)
        pids = descendants(serve.pid)
        alone_listeners = listening(descendants(alone.pid))
        with Chromium() as browser:
            browser.navigate(f"http://127.0.0.1:{dashboard_port}/")
            state, _ = browser.wait_rendered(timeout_s=120, title="Preemption overview")
            assert state.rendered and "listens on this host only" in state.text
        yield Served(dashboard_port, metrics_port, listening(pids), network_log, pids | descendants(alone.pid),
                     alone_port, alone_listeners)
    finally:
        for process in (serve, alone):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_serve_and_its_dashboard_listen_on_loopback_only(served: Served) -> None:
    assert {port for _, port in served.listeners} >= {served.dashboard_port, served.metrics_port}
    assert {address for address, _ in served.listeners} == {"127.0.0.1"}, served.listeners


def test_the_dashboard_command_listens_on_loopback_only(served: Served) -> None:
    assert served.alone_listeners == [("127.0.0.1", served.alone_port)]


def handshake(port: int, host: str, origin: str) -> int:
    """The status of a WebSocket handshake to the dashboard's session endpoint with these headers."""
    try:
        ws = websocket.create_connection(f"ws://127.0.0.1:{port}/_stcore/stream", host=host, origin=origin,
                                         timeout=10)
    except websocket.WebSocketBadStatusException as exc:
        return int(exc.status_code)
    ws.close()
    return 101


def test_a_websocket_naming_a_foreign_host_is_refused(served: Served) -> None:
    port = served.dashboard_port
    # DNS rebinding: a page of rebind.example, whose name now resolves to 127.0.0.1, opens a session.
    assert handshake(port, f"rebind.example:{port}", f"http://rebind.example:{port}") != 101
    assert handshake(port, f"127.0.0.1:{port}", f"http://127.0.0.1:{port}") == 101
    assert handshake(port, f"localhost:{port}", f"http://localhost:{port}") == 101
    # A foreign page's script against the right name: refused by the origin check, without a lookup.
    assert handshake(port, f"127.0.0.1:{port}", "http://elsewhere.example") != 101


def test_no_process_of_serve_reaches_beyond_this_host(served: Served) -> None:
    events = [json.loads(line) for line in served.network_log.read_text().splitlines()]
    hooked = {e["pid"] for e in events if e["event"] == "hooked"}
    assert len(hooked & served.pids) >= 2, "the audit hook watched neither serve nor its dashboard: it proves nothing"
    beyond = [e for e in events if e["event"] != "hooked"
              and not re.search(r"'(127\.0\.0\.1|::1|localhost)'|^'/|AF_UNIX|^None", e["target"])]
    assert not beyond, beyond


def test_a_dashboard_beyond_loopback_needs_a_login_and_a_public_name(tmp_path: Path) -> None:
    config = tmp_path / "preemptlens.toml"
    config.write_text('[dashboard]\naddress = "0.0.0.0"\n')
    with pytest.raises(ConfigError) as raised:
        options(load_config(str(config)), 8501)
    assert "access.proxy_headers or access.oidc" in str(raised.value)
    assert "dashboard.public_host" in str(raised.value)
    config.write_text('[dashboard]\naddress = "0.0.0.0"\npublic_host = "dash.example"\n'
                      '[access]\nproxy_headers = true\nproxy_addresses = ["10.0.0.5"]\n')
    argv = options(load_config(str(config)), 8501)
    hosts = [argv[i + 1] for i, a in enumerate(argv) if a == "--server.allowedHosts"]
    assert hosts == ["localhost", "127.0.0.1", "dash.example"]
    assert argv[argv.index("--client.showErrorDetails") + 1] == "none"
