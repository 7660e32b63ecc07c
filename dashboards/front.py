"""The dashboard's front: the one way in to Streamlit, with a deadline for every request and a share per peer.

Streamlit's server (uvicorn, in Streamlit 1.67) gives a connection as long as it likes to send its request and
takes as many as come: 600 idle connections of one local user lock every reader out, and a proxy in front does
not help while local users can reach Streamlit's own port. Nor can Streamlit listen on a Unix socket (its
Starlette server refuses `server.address = "unix://..."`). So dashboards.launch binds Streamlit's listening
socket itself, a Unix socket in the dashboard's private folder (0700: no other user can connect), and this front
listens on the dashboard's address and port instead:

- each peer (a local user, told apart even on loopback, or a remote address: preemptlens.peers) holds at most
  dashboard.connections_per_peer of the dashboard.max_connections connections; one more is answered 503 and
  closed at once. The auth proxy every reader comes through counts only towards the total
  (dashboard.proxy_users on this host, access.proxy_addresses on another);
- a connection's request line and headers must arrive within HEADER_TIMEOUT_S, at most MAX_HEAD bytes;
- a plain HTTP connection carries one request (sent on with `Connection: close`) and ends after REQUEST_S, or
  once neither side has sent anything for IDLE_S; a WebSocket (a reader's session) ends once neither side has
  sent anything for SESSION_IDLE_S (Streamlit pings every 30 s, so only a dead session is cut);
- Streamlit learns the real peer from the front alone: every X-Forwarded-For and X-Forwarded-Proto a client
  sends is dropped and the front's own X-Forwarded-For names the peer (access.proxy_trusted reads it), which
  Streamlit believes because nobody but the front can reach its socket.

It runs on an event loop of its own, on a thread of the dashboard's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import pwd
import socket
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from preemptlens.peers import Peer, Shares, peer_of

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 10.0
MAX_HEAD = 64 * 1024
REQUEST_S = 120.0
IDLE_S = 30.0
SESSION_IDLE_S = 120.0
# Headers only the front may set for Streamlit: uvicorn takes the client's address and scheme from them.
_DROPPED = (b"x-forwarded-for", b"x-forwarded-proto", b"forwarded", b"connection", b"keep-alive")
_CHUNK = 65536


def _answer(status: str) -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()


def unlimited_peers(users: Iterable[str], addresses: Iterable[str]) -> Callable[[Peer], bool]:
    """Whether a peer is the auth proxy: one of the local `users` (names or uids), or from `addresses` (addresses
    or networks); raises ValueError naming an unknown user or a bad address."""
    uids = set()
    for user in users:
        try:
            uids.add(int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid)
        except KeyError:
            raise ValueError(f"dashboard.proxy_users: no local user {user!r}") from None
    networks = [ipaddress.ip_network(str(a), strict=False) for a in addresses]

    def unlimited(peer: Peer) -> bool:
        if peer.uid is not None:
            return peer.uid in uids
        address = ipaddress.ip_address(str(peer.address))
        return any(address in n for n in networks)

    return unlimited


def rewritten(head: bytes, peer_address: str | None) -> tuple[bytes, bool] | None:
    """The request head as Streamlit gets it, and whether it asks for a WebSocket; None when it is not a
    well-formed request head (folded or nameless header lines)."""
    lines = head.split(b"\r\n")
    request, fields = lines[0], [line for line in lines[1:] if line]
    kept, upgrade = [request], False
    for field in fields:
        name, colon, value = field.partition(b":")
        if not colon or not name or name != name.strip() or field[:1] in (b" ", b"\t"):
            return None
        lowered = name.lower()
        if lowered == b"upgrade" and value.strip().lower() == b"websocket":
            upgrade = True
        if lowered not in _DROPPED:
            kept.append(field)
    kept.append(b"Connection: Upgrade" if upgrade else b"Connection: close")
    if peer_address is not None:
        kept.append(b"X-Forwarded-For: " + peer_address.encode())
    return b"\r\n".join(kept) + b"\r\n\r\n", upgrade


class Front:
    """Listens on `address`:`port` (bound at once, so that a taken port fails the start) and passes each
    connection on to the Unix socket `upstream` once `start` has been called."""

    def __init__(self, address: str, port: int, upstream: Path, shares: Shares) -> None:
        self.upstream = upstream
        self.shares = shares
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((address, port))
            self.sock.listen(512)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="dashboard-front", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(asyncio.start_server(self._connection, sock=self.sock, limit=MAX_HEAD))
        self.loop.run_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection: socket.socket = writer.get_extra_info("socket")
        try:
            peer = peer_of(connection)
        except OSError:
            writer.close()
            return
        if not self.shares.take(peer):
            await self._refuse(writer, "503 Service Unavailable")
            return
        try:
            await self._serve(reader, writer, peer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            self.shares.give_back(peer)
            writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, status: str) -> None:
        with contextlib.suppress(OSError):
            writer.write(_answer(status))
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Peer) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            await self._refuse(writer, "431 Request Header Fields Too Large")
            return
        except TimeoutError:
            await self._refuse(writer, "408 Request Timeout")
            return
        address = writer.get_extra_info("peername")
        forwarded = str(address[0]) if isinstance(address, tuple) else None
        if forwarded is not None and forwarded.startswith("::ffff:"):
            forwarded = forwarded[len("::ffff:"):]
        parsed = rewritten(head, forwarded)
        if parsed is None:
            await self._refuse(writer, "400 Bad Request")
            return
        request, upgrade = parsed
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_unix_connection(str(self.upstream)),
                                                          HEADER_TIMEOUT_S)
        except (OSError, TimeoutError):
            # Streamlit is still starting (or has stopped).
            await self._refuse(writer, "503 Service Unavailable")
            return
        try:
            up_writer.write(request)
            idle = SESSION_IDLE_S if upgrade else IDLE_S
            pipes = _Pipes(idle)
            both = asyncio.gather(pipes.copy(reader, up_writer, last=False), pipes.copy(up_reader, writer, last=True))
            if upgrade:
                await both
            else:
                try:
                    await asyncio.wait_for(both, REQUEST_S)
                except TimeoutError:
                    log.debug("dashboard front: a request of %s ran past %s s", peer, REQUEST_S)
        finally:
            up_writer.close()


class _Pipes:
    """The two directions of one connection. The client's end of its sending is passed on (a client may send
    its request and shut its side); Streamlit's end, an error or `idle` seconds in which neither direction
    carried a byte end both."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self.last = asyncio.get_running_loop().time()
        self.done = asyncio.Event()

    async def copy(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, last: bool) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self.done.is_set():
                try:
                    data = await asyncio.wait_for(source.read(_CHUNK), self.idle)
                except TimeoutError:
                    if loop.time() - self.last >= self.idle:
                        break
                    continue
                if not data:
                    if last:
                        break
                    with contextlib.suppress(OSError):
                        if sink.can_write_eof():
                            sink.write_eof()
                    return
                self.last = loop.time()
                sink.write(data)
                await asyncio.wait_for(sink.drain(), self.idle)
        except (OSError, TimeoutError):
            pass
        self.done.set()
        sink.close()
