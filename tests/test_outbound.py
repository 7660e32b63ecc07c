"""Every outbound call ends in time and reads a bounded answer, against real misbehaving peers on loopback
(tests/hostile_peers.py): a receiver that answers a byte at a time and never finishes, one that answers 400 MB.
Webhooks, Prometheus, the Kubernetes client and the Slurm commands each."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import preemptlens.collectors.kubernetes as k8s
from preemptlens.analytics.alerts import Alert, AlertsSettings, Target, deliver, evaluate
from preemptlens.cli import main
from preemptlens.collectors.kubernetes import actions as k8s_actions
from preemptlens.collectors.kubernetes import policy as k8s_policy
from preemptlens.collectors.kubernetes import watch
from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.config import Secret, load_config
from preemptlens.errors import SourceError, TransientSourceError
from preemptlens.warehouse import Warehouse
from tests.hostile_peers import Drip, Huge, Peer
from tests.prometheus.helpers import collector

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
CAP = 32 * 2**20  # what a peer may push into kernel buffers and our first reads, far below its 400 MB


class Rule:
    name = "fixed"

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def evaluate(self, wh: Warehouse, config: object, now: datetime) -> list[Alert]:
        return [Alert(f"k{i}", self.name, "platform", f"alert {i}", "text") for i in range(self.keys)]


def due_alerts(tmp_path: Path, url: str, count: int) -> tuple[Warehouse, dict[str, Target]]:
    wh = Warehouse(tmp_path / "w.duckdb")
    targets = {"platform": Target("platform", Secret(url))}
    evaluate(wh, load_config(overrides={}), targets, NOW, [Rule(count)])  # type: ignore[list-item]
    return wh, targets


def test_a_dripping_webhook_costs_one_timeout_per_round(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with Drip() as peer:
        wh, targets = due_alerts(tmp_path, f"{peer.url}/hook", 10)
        began = time.monotonic()
        report = deliver(wh, targets, NOW, timeout_s=1.0, allow_private_addresses=True)
        took = time.monotonic() - began
    assert took < 3, f"one round took {took:.1f} s against a receiver dripping its answer"
    assert (report.sent, report.failed, report.postponed) == (0, 1, 9)
    assert peer.connections == 1
    (error,) = [e for (e,) in wh.query("SELECT last_error FROM alerts WHERE last_error IS NOT NULL").iter_rows()]
    assert error.startswith("timed out")
    wh.close()


def test_a_round_ends_at_round_s_when_receivers_each_take_their_time(tmp_path: Path) -> None:
    # Three alerts, each to a receiver of its own that drips: the round stops after round_s.
    peers = [Drip() for _ in range(3)]
    try:
        wh = Warehouse(tmp_path / "w.duckdb")
        targets = {f"team:{i}": Target(f"team:{i}", Secret(p.url)) for i, p in enumerate(peers)}

        class PerTeam(Rule):
            def evaluate(self, wh: Warehouse, config: object, now: datetime) -> list[Alert]:
                return [Alert(f"k{i}", self.name, f"team:{i}", "t", "x") for i in range(3)]

        evaluate(wh, load_config(overrides={}), targets, NOW, [PerTeam(3)])  # type: ignore[list-item]
        began = time.monotonic()
        report = deliver(wh, targets, NOW, timeout_s=1.0, round_s=1.5, allow_private_addresses=True)
        assert time.monotonic() - began < 3.5
        assert (report.failed, report.postponed) == (2, 1)
        wh.close()
    finally:
        for peer in peers:
            peer.close()


def test_name_resolution_is_inside_the_webhook_deadline_and_private_addresses_are_refused() -> None:
    """Against libc's own resolver asking a DNS server that answers 30 s late (tests/resolver_namespace.py, in a
    mount and network namespace of its own): the post ends at its 2 s deadline. A name resolving to loopback,
    link-local or an IPv4 loopback written as IPv6 is refused before any connection unless allowed; allowed, the
    receiver sees the name in Host, and the name was looked up once."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip("needs root, unshare and ip for a namespace with a resolver of its own")
    script = Path(__file__).with_name("resolver_namespace.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(script.parents[1]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(["unshare", "--mount", "--net", sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    results = seen["results"]
    assert results["slow"]["outcome"] == "CallTimedOut"
    assert results["slow"]["seconds"] < 3.5, f"{results['slow']['seconds']:.1f} s with timeout_s = 2"
    for case in ("loop refused", "meta refused", "mapped refused"):
        assert results[case]["outcome"] == "RefusedAddress", (case, results[case])
    assert results["loop allowed"]["outcome"] == "200"
    # Refused before connecting: the receiver saw only the allowed post, under the name it was given.
    assert seen["hosts"] == [f"loop.example:{seen['port']}"] * 2  # the post, then urllib3's GET
    assert seen["asked"]["loop.example"] == 3, "one lookup per call (the refused post, the allowed one, the GET)"
    # urllib3 under a Deadline (the Kubernetes client, Prometheus): the lookup counts against it too.
    assert results["urllib3 slow"]["outcome"] != "200" and results["urllib3 slow"]["seconds"] < 3.5, results
    assert results["urllib3 loop"]["outcome"] == "200", results
    # A public address passes the check (and then cannot be reached from the namespace).
    assert results["public"]["outcome"] not in ("RefusedAddress", "CallTimedOut"), results["public"]


def test_a_loopback_webhook_is_refused_by_default_and_delivered_when_allowed(tmp_path: Path) -> None:
    with Drip() as peer:
        wh, targets = due_alerts(tmp_path, f"{peer.url}/hook", 1)
        report = deliver(wh, targets, NOW, timeout_s=1.0)
        assert (report.sent, report.failed) == (0, 1) and peer.connections == 0
        (error,) = [e for (e,) in wh.query("SELECT last_error FROM alerts").iter_rows()]
        assert "loopback, private or link-local" in error and "alerts.allow_private_addresses" in error
        assert "127.0.0.1" not in error
        wh.close()
    config = load_config(overrides={"alerts.allow_private_addresses": "true"})
    assert config.of(AlertsSettings).allow_private_addresses is True
    assert load_config(overrides={}).of(AlertsSettings).allow_private_addresses is False


def test_a_webhook_answering_400_mb_is_not_read(tmp_path: Path) -> None:
    with Huge() as peer:
        wh, targets = due_alerts(tmp_path, peer.url, 1)
        began = time.monotonic()
        report = deliver(wh, targets, NOW, timeout_s=5.0, allow_private_addresses=True)
        assert time.monotonic() - began < 5
        time.sleep(0.5)
        assert peer.sent < CAP, f"{peer.sent:,} bytes read"
    assert report.sent == 1, "a 2xx is a delivery, whatever follows it"
    wh.close()


def test_prometheus_dripping_or_huge_answers_end_in_time(tmp_path: Path) -> None:
    since, until = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 2, 6, tzinfo=UTC)
    with Drip() as peer:
        began = time.monotonic()
        with pytest.raises(TransientSourceError, match="did not answer"):
            list(collector(peer.url, since, until, timeout_s=2).batches({}))
        assert time.monotonic() - began < 5
    with Huge() as peer:
        began = time.monotonic()
        with pytest.raises(SourceError, match=r"more than 1,048,576 bytes") as err:
            list(collector(peer.url, since, until, max_response_bytes="1MiB").batches({}))
        assert time.monotonic() - began < 10
        time.sleep(0.5)
        assert peer.sent < CAP, f"{peer.sent:,} bytes read"
    assert "max_response_bytes" in err.value.hint


def kubernetes_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "k.toml"
    path.write_text(f'[cluster]\nname = "k"\n[kubernetes]\napi_url = "{url}"\nmax_retries = 0\n'
                    'watch_seconds = 2\nidle_seconds = 1\n')
    path.chmod(0o600)
    return path


def test_kubernetes_dripping_or_huge_answers_end_in_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "MAX_LIST_BYTES", 2**20)
    monkeypatch.setattr(watch, "LIST_DEADLINE_S", 3.0)
    for peer, said in ((Drip(), "a list page took longer than 3 s"), (Huge(), "larger than 1,048,576 bytes")):
        caplog.clear()
        with peer:
            began = time.monotonic()
            main(["--config", str(kubernetes_config(tmp_path, peer.url)), "--warehouse",
                  str(tmp_path / "w.duckdb"), "collect", "kubernetes"])
            took = time.monotonic() - began
            time.sleep(0.5)
            assert peer.sent < CAP, f"{peer.sent:,} bytes read"
        # A stream that fails is a warning; the collection goes on with the other streams.
        assert said in caplog.text, caplog.text
        assert took < 10, f"{took:.0f} s"


def test_a_kubernetes_effector_read_or_patch_ends_in_time_and_reads_one_object_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The actions' effectors read and patch one object: a peer that drips or answers 400 MB ends the call."""
    monkeypatch.setattr(k8s_actions, "CALL_DEADLINE_S", 3.0)
    for peer, said in ((Drip(), "no whole answer within 3 s"), (Huge(), "answer larger than 8,388,608 bytes")):
        with peer:
            _, effector = k8s_actions.build_effector("kai_protect", load_config(kubernetes_config(tmp_path, peer.url)))
            objects = effector.objects
            objects._where["pg-1"] = ("team-a", "job-1")  # known from an earlier listing
            for verb in ("get", "patch"):
                began = time.monotonic()
                with pytest.raises(SourceError) as err:
                    if verb == "get":
                        objects.get("pg-1")
                    else:
                        objects.patch("pg-1", {"metadata": {"labels": {"a": "b"}}})
                assert said in err.value.message and peer.url not in err.value.message
                assert time.monotonic() - began < 10
            time.sleep(0.5)
            assert peer.sent < CAP, f"{peer.sent:,} bytes read"


class EndlessPages(Peer):
    """A list that never ends: each page of 64 KiB comes at once and names a next one."""

    def answer(self, conn: socket.socket) -> None:
        body = json.dumps({"items": [{"metadata": {"name": "q"}, "pad": "x" * 65_000}],
                           "metadata": {"continue": "more"}}).encode()
        self.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def test_the_kubernetes_policy_read_ends_in_time_and_reads_at_most_its_cap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ClusterQueues read for the replay's policy: a peer that drips, answers 400 MB, or pages forever ends
    the read within its total deadline and byte cap, over all pages; the policy rows are left out, not the
    collection."""
    monkeypatch.setattr(k8s_policy, "READ_DEADLINE_S", 3.0)
    monkeypatch.setattr(k8s_policy, "MAX_READ_BYTES", 2**20)
    cases = ((Drip(), "not read whole within 3 s"), (Huge(), "larger than 1,048,576 bytes"),
             (EndlessPages(), "larger than 1,048,576 bytes"))
    for peer, said in cases:
        caplog.clear()
        with peer:
            path = kubernetes_config(tmp_path, peer.url)
            path.write_text(path.read_text() + 'streams = ["workloads"]\n')
            collector = k8s.build(argparse.Namespace(), load_config(path))
            began = time.monotonic()
            assert list(k8s_policy.batches(collector, None)) == []
            took = time.monotonic() - began
            time.sleep(0.5)
            assert peer.sent < CAP, f"{peer.sent:,} bytes read"
        assert said in caplog.text, caplog.text
        assert took < 10, f"{took:.0f} s"


def hostile_command(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_slurm_commands_that_print_forever_or_never_end_are_stopped(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hostile_command(bin_dir, "scontrol", "exec yes 'PreemptType = preempt/partition_prio'")
    hostile_command(bin_dir, "sacct", "sleep 600")
    slurm = SlurmCollector(Options(cluster="c", bin_dir=str(bin_dir), timeout_s=3, max_output_bytes=4 * 2**20,
                                   since=datetime(2026, 11, 1, tzinfo=UTC), until=datetime(2026, 11, 1, 6, tzinfo=UTC)))
    began = time.monotonic()
    with pytest.raises(SourceError, match="more than 4,194,304 bytes"):
        slurm._run(["scontrol", "show", "config"])
    assert time.monotonic() - began < 5
    began = time.monotonic()
    with pytest.raises(SourceError, match="did not finish within 3s"):
        with slurm._sacct(["-S", "now"], "json") as stream:
            stream.read()
    assert time.monotonic() - began < 8
    hostile_command(bin_dir, "sacct", "exec yes '1|2|3'")
    with pytest.raises(SourceError, match="sacct's output is larger than 4,194,304 bytes"):
        with slurm._sacct(["-S", "now"], "parsable2") as stream:
            for _ in stream:
                pass
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _is_yes(p)], "a killed command lingers"


def _is_yes(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"yes\0") and \
            Path(f"/proc/{pid}/status").read_text().find(f"PPid:\t{os.getpid()}") >= 0
    except OSError:
        return False
