"""Webhook deliveries against a real resolver that answers late, run by tests/test_outbound.py as root inside
`unshare --mount --net`: a network namespace of its own (only its loopback, nothing reaches out) whose
/etc/resolv.conf, bind-mounted for this process alone, names a tiny DNS server on 127.0.0.1:53 started here. So
libc's own getaddrinfo asks it, as on a host whose resolver is slow.

Names it answers: `slow.example` after SLOW_S seconds; `loop.example` 127.0.0.1 at once; `meta.example`
169.254.169.254 (a cloud's metadata address); `mapped.example` only the IPv6 ::ffff:127.0.0.1; `public.example`
1.1.1.1 (unreachable here: the namespace has no route out). urllib3's connections under outbound.install (the
Kubernetes client's, Prometheus's) are tried against the slow name too. It prints one JSON object: each case's
outcome and time, the Host header the receiver saw, and how many A questions each name was asked."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import urllib3

from preemptlens import outbound

SLOW_S = 30.0
ANSWERS = {
    "slow.example": ("A", "127.0.0.1"),
    "loop.example": ("A", "127.0.0.1"),
    "meta.example": ("A", "169.254.169.254"),
    "mapped.example": ("AAAA", "::ffff:127.0.0.1"),
    "public.example": ("A", "1.1.1.1"),
}
TYPES = {1: "A", 28: "AAAA"}
asked: dict[str, int] = {}


def question(packet: bytes) -> tuple[str, int, int]:
    """The name, type and end offset of a query's first question."""
    labels, at = [], 12
    while packet[at]:
        labels.append(packet[at + 1:at + 1 + packet[at]].decode())
        at += 1 + packet[at]
    qtype = struct.unpack("!H", packet[at + 1:at + 3])[0]
    return ".".join(labels).lower(), qtype, at + 5


def answer(packet: bytes) -> bytes:
    name, qtype, end = question(packet)
    kind, address = ANSWERS.get(name, ("", ""))
    records = b""
    if TYPES.get(qtype) == kind:
        family = socket.AF_INET if kind == "A" else socket.AF_INET6
        data = socket.inet_pton(family, address)
        records = struct.pack("!HHHIH", 0xC00C, qtype, 1, 60, len(data)) + data
    rcode = 0 if name in ANSWERS else 3  # NXDOMAIN for any other name
    header = struct.pack("!HHHHHH", struct.unpack("!H", packet[:2])[0], 0x8180 | rcode, 1, 1 if records else 0, 0, 0)
    return header + packet[12:end] + records


def serve_dns() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 53))

    def reply(packet: bytes, peer: tuple[str, int]) -> None:
        name, qtype, _ = question(packet)
        if qtype == 1:
            asked[name] = asked.get(name, 0) + 1
        if name == "slow.example":
            time.sleep(SLOW_S)
        server.sendto(answer(packet), peer)

    while True:
        packet, peer = server.recvfrom(512)
        threading.Thread(target=reply, args=(packet, peer), daemon=True).start()


hosts: list[str] = []


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        hosts.append(self.headers.get("Host", ""))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:
        hosts.append(self.headers.get("Host", ""))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as conf:
        conf.write("nameserver 127.0.0.1\noptions timeout:30 attempts:1\n")
    subprocess.run(["mount", "--bind", conf.name, "/etc/resolv.conf"], check=True)
    threading.Thread(target=serve_dns, daemon=True).start()
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = receiver.server_address[1]
    cases = {
        "slow": ("slow.example", True),
        "loop refused": ("loop.example", False),
        "loop allowed": ("loop.example", True),
        "meta refused": ("meta.example", False),
        "mapped refused": ("mapped.example", False),
        "public": ("public.example", False),
    }
    results = {}
    for case, (name, allow) in cases.items():
        began = time.monotonic()
        try:
            outcome = str(outbound.post(f"http://{name}:{port}/hook", b"{}", {}, timeout_s=2.0,
                                        allow_private=allow))
        except Exception as exc:  # noqa: BLE001 -- the outcome is what is reported
            outcome = type(exc).__name__
        results[case] = {"outcome": outcome, "seconds": time.monotonic() - began}
    # A client through urllib3 with outbound.install (the Kubernetes client, Prometheus): the same bound.
    pool = outbound.install(urllib3.PoolManager(retries=False))
    for case, name in (("urllib3 slow", "slow.example"), ("urllib3 loop", "loop.example")):
        began = time.monotonic()
        try:
            with outbound.Deadline(2.0) as deadline, deadline.current():
                outcome = str(pool.request("GET", f"http://{name}:{port}/list", timeout=60.0).status)
        except Exception as exc:  # noqa: BLE001 -- the outcome is what is reported
            outcome = type(exc).__name__
        results[case] = {"outcome": outcome, "seconds": time.monotonic() - began}
    json.dump({"results": results, "hosts": hosts, "asked": asked, "port": port}, sys.stdout)


if __name__ == "__main__":
    main()
