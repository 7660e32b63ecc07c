"""Who is on the other end of a connection, and each one's fair share of a listener's connections.

A listener with one cap on connections at once (as /metrics had) is one local user's to take: forty
half-sent connections, reopened as they close, keep Prometheus out for as long as they like. So every
listener preemptlens owns (/metrics and /live-costs, the dashboard's front) counts connections per peer and
refuses a peer's connection beyond its share, while others still get in.

The peer is the local user where the kernel can tell: on loopback every local user shares 127.0.0.1, so an
address says nothing. A Unix socket's peer is the uid the kernel gives (SO_PEERCRED); a TCP peer on this
host (on loopback or on any of its addresses) is the uid that owns the connecting socket, which the kernel's
socket diagnostics (NETLINK_SOCK_DIAG, what `ss -e` reads) find by the connection's exact two ends, at a
constant cost however many sockets the host holds (unlike reading /proc/net/tcp). A peer on another host is
its address. Users acting together get a share each: the cap on all connections still holds.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_TCP_LISTEN = 10
_HEADER = struct.Struct("=IHHII")
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid
_REQUEST = struct.Struct("=BBBxI")
# inet_diag_sockid: source port, destination port (network order), source, destination (16 bytes each),
# interface, cookie
_SOCKID = struct.Struct("!HH16s16s")
_SOCKID_REST = struct.Struct("=III")
# inet_diag_msg: family, state, timer, retransmits, the sockid (48 bytes), expires, rqueue, wqueue, uid, inode
_MESSAGE = struct.Struct("=BBBB48sIIIII")


@dataclass(frozen=True)
class Peer:
    """A local user (`uid`) or, for a peer on another host, its `address`."""

    uid: int | None = None
    address: str | None = None

    def __str__(self) -> str:
        return f"uid {self.uid}" if self.uid is not None else str(self.address)


def _packed(family: int, host: str) -> bytes:
    return socket.inet_pton(family, host).ljust(16, b"\0")


def tcp_owner(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The uid owning the TCP socket on this host whose two ends are `peer` (its own) and `local` (ours); None
    when no socket on this host has them (a peer on another host, or one already gone)."""
    peer_host, local_host = ipaddress.ip_address(peer[0]), ipaddress.ip_address(local[0])
    # A listener on :: takes IPv4 clients as ::ffff:a.b.c.d; their own sockets are IPv4 ones.
    if isinstance(peer_host, ipaddress.IPv6Address) and peer_host.ipv4_mapped is not None:
        peer_host = peer_host.ipv4_mapped
    if isinstance(local_host, ipaddress.IPv6Address) and local_host.ipv4_mapped is not None:
        local_host = local_host.ipv4_mapped
    if peer_host.version != local_host.version:
        return None
    family = socket.AF_INET if peer_host.version == 4 else socket.AF_INET6
    sockid = _SOCKID.pack(peer[1], local[1], _packed(family, str(peer_host)), _packed(family, str(local_host)))
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0xFFFFFFFF) + sockid + _SOCKID_REST.pack(
        0, _NO_COOKIE, _NO_COOKIE)
    message = _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + body
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(1.0)
            diag.sendto(message, (0, 0))
            answer = diag.recv(8192)
    except OSError:
        return None
    if len(answer) < _HEADER.size + _MESSAGE.size:
        return None
    _, kind, _, _, _ = _HEADER.unpack_from(answer)
    if kind != _SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no such socket here
    _, state, _, _, found, _, _, _, uid, _ = _MESSAGE.unpack_from(answer, _HEADER.size)
    # Only the exact connection counts: without one, the kernel may answer with a listener on that port.
    if state == _TCP_LISTEN or found[: _SOCKID.size] != sockid:
        return None
    return int(uid)


def peer_of(connection: socket.socket) -> Peer:
    """The peer of an accepted connection: a local user where the kernel can tell, else the remote address."""
    if connection.family == socket.AF_UNIX:
        pid_uid_gid = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return Peer(uid=struct.unpack("3i", pid_uid_gid)[1])
    peer, local = connection.getpeername(), connection.getsockname()
    uid = tcp_owner((peer[0], peer[1]), (local[0], local[1]))
    return Peer(uid=uid) if uid is not None else Peer(address=str(peer[0]))


class Shares:
    """At most `total` connections at once, and at most `per_peer` of them from any one peer, except the
    `unlimited` peers (an auth proxy all readers come through), which count only towards the total."""

    def __init__(self, total: int, per_peer: int, unlimited: Callable[[Peer], bool] = lambda peer: False) -> None:
        self.total = total
        self.per_peer = per_peer
        self.unlimited = unlimited
        self._held: Counter[Peer] = Counter()
        self._lock = threading.Lock()

    def take(self, peer: Peer) -> bool:
        """One connection for `peer`, if its share and the total allow; else False (refuse it)."""
        with self._lock:
            if sum(self._held.values()) >= self.total:
                return False
            if self._held[peer] >= self.per_peer and not self.unlimited(peer):
                return False
            self._held[peer] += 1
            return True

    def give_back(self, peer: Peer) -> None:
        with self._lock:
            self._held[peer] -= 1
            if self._held[peer] <= 0:
                del self._held[peer]

    def held(self) -> dict[Peer, int]:
        with self._lock:
            return dict(self._held)
