"""The dashboard's front on a shared machine (dashboards/front.py), against a real `preemptlens dashboard`: Streamlit
itself listens on no TCP port but on a Unix socket no other user may reach, and another local user's 600 idle
and 40 half-sent connections, reopened as they close, leave a reader's page loading in Chromium; without a
share per peer (the control) the same connections lock readers out."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from browser import Chromium, Dashboard

from preemptlens.dashboards.front import rewritten, unlimited_peers
from preemptlens.peers import Peer, Shares
from tests.dashboards.test_access_listen import descendants, listening
from tests.local_user import NOBODY, connections_of_another_user

HALF_SENT = b"GET /_stcore/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: "


def health(port: int) -> tuple[int, float]:
    """The health check's status (0: no answer) and how long it took."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(b"GET /_stcore/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = client.recv(100)
    status = int(answer.split()[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return status, time.monotonic() - began


def connected_as(uid: int, port: int) -> int:
    """Connections to `port` that `uid` holds open (its own ends, as the kernel lists them)."""
    out = subprocess.run(["ss", "-tnHe", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True, check=True).stdout
    return sum(f"uid:{uid} " in line for line in out.splitlines())


def served_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
    (tmp_path / "tmp").mkdir(mode=0o700, exist_ok=True)
    env["TMPDIR"] = str(tmp_path / "tmp")
    env.update({f"PREEMPTLENS_DASHBOARD__{k.upper()}": v for k, v in settings.items()})
    return env


def test_streamlit_is_reachable_only_through_the_front(cluster_warehouse: Path, tmp_path: Path) -> None:
    # A temporary folder of a short name, as /tmp is: the socket is bound by its own path (the other tests'
    # deep one is reached through /proc/self/fd).
    short = Path(tempfile.mkdtemp(prefix="plens-front-", dir="/tmp"))
    env = {**served_env(tmp_path), "TMPDIR": str(short)}
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, short, ignore_errors=True)
        served = stack.enter_context(Dashboard(cluster_warehouse, tmp_path / "dashboard.log", env=env))
        assert listening(descendants(served.process.pid)) == [("127.0.0.1", served.port)]
        (path,) = short.glob("preemptlens-dashboard-*/streamlit.sock")
        assert path.is_socket() and path.parent.stat().st_mode & 0o777 == 0o700
        pid = os.fork()
        if pid == 0:
            os.setgroups([])
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
            try:
                socket.socket(socket.AF_UNIX).connect(str(path))
            except PermissionError:
                os._exit(3)
            os._exit(0)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3, "another user reached Streamlit's socket"
        # A request that does not arrive within the front's deadline is cut with 408.
        began = time.monotonic()
        with socket.create_connection(("127.0.0.1", served.port), timeout=60) as slow:
            slow.sendall(HALF_SENT)
            assert slow.recv(100).startswith(b"HTTP/1.1 408")
        assert time.monotonic() - began < 40


def test_one_local_users_connections_leave_readers_their_page(cluster_warehouse: Path, tmp_path: Path) -> None:
    with Dashboard(cluster_warehouse, tmp_path / "dashboard.log", env=served_env(tmp_path)) as served, \
            connections_of_another_user(served.port, 600), \
            connections_of_another_user(served.port, 40, HALF_SENT):
        deadline = time.monotonic() + 120
        while connected_as(NOBODY.pw_uid, served.port) < 32 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert connected_as(NOBODY.pw_uid, served.port) >= 32, "the attack never got under way"
        checks = [health(served.port) for _ in range(5)]
        assert all(status == 200 for status, _ in checks), checks
        # Generous for a loaded machine: without a share per peer they are refused (the control below).
        assert max(seconds for _, seconds in checks) < 60, checks
        with Chromium() as browser:
            browser.navigate(served.url)
            state, seconds = browser.wait_rendered(timeout_s=180, title="Preemption overview")
            assert state.rendered and not state.exceptions, f"not rendered in {seconds:.1f} s: {state.text[:300]}"


def test_without_a_share_per_peer_the_same_connections_lock_readers_out(
    cluster_warehouse: Path, tmp_path: Path
) -> None:
    """The control: when one peer may hold every connection, that user's idle ones keep readers out."""
    env = served_env(tmp_path, max_connections="64", connections_per_peer="64")
    with Dashboard(cluster_warehouse, tmp_path / "dashboard.log", env=env) as served, \
            connections_of_another_user(served.port, 600):
        deadline = time.monotonic() + 120
        refused = False
        while not refused and time.monotonic() < deadline:
            refused = health(served.port)[0] == 503
        assert refused, "readers got in although one user held every connection"


@pytest.mark.parametrize("forged", [b"X-Forwarded-For: 10.0.0.5", b"x-forwarded-for:10.0.0.5",
                                    b"X-Forwarded-Proto: https", b"Forwarded: for=10.0.0.5"])
def test_a_forwarded_address_a_client_sends_is_dropped(forged: bytes) -> None:
    head = b"GET / HTTP/1.1\r\nHost: localhost\r\n" + forged + b"\r\nConnection: keep-alive\r\n\r\n"
    parsed = rewritten(head, "127.0.0.1")
    assert parsed is not None
    request, upgrade = parsed
    assert not upgrade and b"10.0.0.5" not in request and b"https" not in request
    assert request.endswith(b"Connection: close\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n")


def test_a_websocket_keeps_its_upgrade_and_a_folded_header_is_refused() -> None:
    head = b"GET /_stcore/stream HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    parsed = rewritten(head, None)
    assert parsed is not None and parsed[1] and parsed[0].count(b"Connection: Upgrade") == 1
    assert rewritten(b"GET / HTTP/1.1\r\nHost: h\r\n X-Forwarded-For: 10.0.0.5\r\n\r\n", None) is None
    assert rewritten(b"GET / HTTP/1.1\r\nX-Forwarded-For : 10.0.0.5\r\n\r\n", None) is None


def test_the_auth_proxy_counts_only_towards_the_total() -> None:
    unlimited = unlimited_peers(["nobody"], ["10.0.0.0/24"])
    proxy, remote_proxy, reader = Peer(uid=NOBODY.pw_uid), Peer(address="10.0.0.7"), Peer(uid=1234)
    assert unlimited(proxy) and unlimited(remote_proxy) and not unlimited(reader)
    assert not unlimited(Peer(address="10.0.1.7")) and unlimited_peers([str(NOBODY.pw_uid)], [])(proxy)
    shares = Shares(total=6, per_peer=2, unlimited=unlimited)
    assert [shares.take(reader) for _ in range(3)] == [True, True, False]
    assert [shares.take(proxy) for _ in range(5)] == [True, True, True, True, False], "the total still holds"
    shares.give_back(reader)
    assert shares.take(proxy) and shares.held() == {reader: 1, proxy: 5}
    with pytest.raises(ValueError, match="no local user 'no-such-user'"):
        unlimited_peers(["no-such-user"], [])
