"""Every call preemptlens makes to another program ends in time and reads a bounded answer.

A socket timeout bounds one read, not a call: a peer that answers a byte a
second (a webhook receiver, a Prometheus behind a broken proxy, an API server
that streams an endless header) keeps a call alive for as long as it likes, and
one that answers 400 MB fills the memory of whoever reads it whole. So:

- `Deadline`: a total time for one call. Sockets connected or used while it is
  `current()` are shut down when it expires (a watchdog thread does it), so a
  read blocked on a dripping peer returns at once; `check()` then raises
  `CallTimedOut`. urllib3's connections report their sockets to it once
  `install(pool_manager)` (or `BoundedAdapter` for a requests session) is
  done: the Prometheus collector and the Kubernetes client use it. Their host
  names are then looked up within the deadline too (`resolve`).
- `read_capped`, `Capped`: the answer's bytes up to a limit, then
  `AnswerTooLarge`, never more in memory.
- `run`: a command (sacct, scontrol) killed at its deadline, its output capped.
- `post`: the webhooks' one POST over http.client, with both. Its deadline covers name resolution too
  (`resolve`: getaddrinfo in a worker thread, waited for only as long as the deadline leaves), and it connects
  to the addresses found, so the name is looked up once: a name that resolves to a loopback, private or
  link-local address (another service of this host or network) is refused unless the caller allows it.

A caller turns `CallTimedOut` / `AnswerTooLarge` into its own error, naming the
source and never the URL (which may be a secret).
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import io
import ipaddress
import itertools
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any


class CallTimedOut(TimeoutError):
    """A call ran past its total deadline."""


class AnswerTooLarge(OSError):
    """An answer was larger than the caller's limit; nothing more of it was read."""


class RefusedAddress(ConnectionError):
    """A name resolved to an address the caller does not allow (loopback, private, link-local)."""


# -- deadlines --------------------------------------------------------------

_LOCAL = threading.local()
_HEAP: list[tuple[float, int, Deadline]] = []
_CHANGED = threading.Condition()
_ORDER = itertools.count()
_WATCHDOG: list[threading.Thread] = []


def _shut(sock: socket.socket) -> None:
    # The syscall on the descriptor, under any TLS layer: an SSLSocket's own shutdown would drop its
    # state under a thread still reading it.
    with contextlib.suppress(OSError, ValueError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _watch() -> None:
    while True:
        with _CHANGED:
            while not _HEAP or _HEAP[0][0] > time.monotonic():
                _CHANGED.wait(None if not _HEAP else max(0.0, _HEAP[0][0] - time.monotonic()))
            _, _, due = heapq.heappop(_HEAP)
        due.expire()


class Deadline:
    """A total time for one call, from now. Use it as a context manager (its lifetime) and
    `with d.current():` around the calls whose sockets it should watch."""

    def __init__(self, seconds: float, what: str = "the call") -> None:
        self.seconds = seconds
        self.what = what
        self.at = time.monotonic() + seconds
        self.expired = False
        self.closed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        with _CHANGED:
            if not _WATCHDOG:
                thread = threading.Thread(target=_watch, name="preemptlens-deadlines", daemon=True)
                thread.start()
                _WATCHDOG.append(thread)
            heapq.heappush(_HEAP, (self.at, next(_ORDER), self))
            _CHANGED.notify()

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def watch(self, sock: socket.socket | None) -> None:
        """Shut `sock` down when this deadline expires (at once if it has)."""
        if sock is None:
            return
        with self._lock:
            if self.closed:
                return
            if self.expired:
                _shut(sock)
            self._sockets.append(sock)

    def expire(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def check(self) -> None:
        """Raise CallTimedOut when the deadline has passed."""
        if self.expired or time.monotonic() >= self.at:
            self.expired = True
            raise CallTimedOut(f"{self.what} took longer than {self.seconds:g} s")

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._sockets.clear()

    @contextlib.contextmanager
    def current(self) -> Iterator[Deadline]:
        """While inside, the sockets this thread's urllib3 connections connect or send on are watched."""
        previous = getattr(_LOCAL, "deadline", None)
        _LOCAL.deadline = self
        try:
            yield self
        finally:
            _LOCAL.deadline = previous

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def current() -> Deadline | None:
    return getattr(_LOCAL, "deadline", None)


# -- urllib3 (requests, the Kubernetes client) -------------------------------


def _watched(base: type) -> type:
    """`base` (a urllib3 connection class) reporting its socket to the thread's current Deadline."""

    class Watched(base):
        _dns_host: str  # urllib3's: the name connected to (the `host` property strips its trailing dot)

        def _new_conn(self) -> socket.socket:
            deadline = current()
            if deadline is None or _is_address(self._dns_host):
                sock = super()._new_conn()
            else:
                sock = self._connect_resolved(deadline)
            # The plain socket, before any TLS handshake: a handshake can drip too.
            if deadline is not None:
                deadline.watch(sock)
            return sock

        def _connect_resolved(self, deadline: Deadline) -> socket.socket:
            """The name looked up within `deadline` (resolve), then each address connected to as urllib3 connects
            to a name (its socket options, timeouts and errors); the name is kept for TLS and the Host header."""
            import urllib3.exceptions

            name = self._dns_host
            try:
                infos = resolve(name, self.port, deadline)
            except socket.gaierror as exc:
                raise urllib3.exceptions.NameResolutionError(self.host, self, exc) from exc
            try:
                for number, info in enumerate(infos):
                    self._dns_host = str(info[4][0])
                    try:
                        return super()._new_conn()
                    except urllib3.exceptions.HTTPError:
                        if number == len(infos) - 1:
                            raise
                raise urllib3.exceptions.NewConnectionError(self, "the name has no address")
            finally:
                self._dns_host = name

        def request(self, *args: Any, **kwargs: Any) -> Any:
            # A pooled connection, connected for an earlier call, serves this one.
            deadline = current()
            if deadline is not None and getattr(self, "sock", None) is not None:
                deadline.watch(self.sock)
            return super().request(*args, **kwargs)

    Watched.__name__ = Watched.__qualname__ = f"Watched{base.__name__}"
    return Watched


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _watched_pool(base: Any) -> type:
    return type(f"Watched{base.__name__}", (base,), {"ConnectionCls": _watched(base.ConnectionCls)})


def install(pool_manager: Any) -> Any:
    """Make `pool_manager`'s (a urllib3 PoolManager's, or a ProxyManager's) connections report their sockets
    to the current Deadline; pools it made before are closed first."""
    pool_manager.clear()
    pool_manager.pool_classes_by_scheme = {
        scheme: _watched_pool(pool) for scheme, pool in pool_manager.pool_classes_by_scheme.items()
    }
    return pool_manager


def bounded_adapter(**kwargs: Any) -> Any:
    """A requests HTTPAdapter (`kwargs` as HTTPAdapter's) whose connections report to the current Deadline."""
    from requests.adapters import HTTPAdapter

    class BoundedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kw: Any) -> None:
            super().init_poolmanager(*args, **kw)
            install(self.poolmanager)

    return BoundedAdapter(**kwargs)


def read_capped(chunks: Iterable[bytes], limit: int, deadline: Deadline | None = None) -> bytes:
    """The chunks joined, at most `limit` bytes (AnswerTooLarge beyond), before `deadline`."""
    parts: list[bytes] = []
    size = 0
    try:
        for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise AnswerTooLarge(f"the answer is larger than {limit:,} bytes")
            parts.append(chunk)
            if deadline is not None:
                deadline.check()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # A socket the deadline shut down ends the read with a broken connection: say what happened.
        if deadline is not None and not isinstance(exc, AnswerTooLarge):
            deadline.check()
        raise
    if deadline is not None:
        deadline.check()
    return b"".join(parts)


class Capped(io.RawIOBase):
    """A stream read at most `limit` bytes far (AnswerTooLarge beyond): `read(n)` and lines, binary or text."""

    def __init__(self, stream: IO[Any], limit: int, what: str) -> None:
        super().__init__()
        self.stream = stream
        self.limit = limit
        self.what = what
        self.read_so_far = 0

    def _count(self, data: Any) -> Any:
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise AnswerTooLarge(f"{self.what} is larger than {self.limit:,} bytes")
        return data

    def read(self, size: int | None = -1) -> Any:
        if size is None or size < 0:
            size = self.limit - self.read_so_far + 1
        return self._count(self.stream.read(size))

    def readline(self, size: int | None = -1) -> Any:
        left = self.limit - self.read_so_far + 1
        return self._count(self.stream.readline(left if size is None or size < 0 else min(size, left)))

    def __iter__(self) -> Iterator[Any]:
        while line := self.readline():
            yield line

    def readable(self) -> bool:
        return True


# -- commands ---------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run(argv: Sequence[str], *, timeout_s: float, limit: int, env: Mapping[str, str] | None = None) -> Ran:
    """Run a command to its end, killed at `timeout_s` (subprocess.TimeoutExpired) or once it has printed more
    than `limit` bytes on stdout or stderr (AnswerTooLarge); its output as text."""
    proc = subprocess.Popen(list(argv), env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0)
    outputs: dict[str, bytes] = {}
    too_large: list[str] = []

    def drain(name: str, stream: IO[bytes]) -> None:
        parts, size = [], 0
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
            size += len(chunk)
            if size > limit:
                too_large.append(name)
                kill(proc)
                break
            parts.append(chunk)
        outputs[name] = b"".join(parts)

    assert proc.stdout is not None and proc.stderr is not None
    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill(proc)
        proc.wait()
        raise
    finally:
        for reader in readers:
            reader.join(5)
        proc.stdout.close()
        proc.stderr.close()
    if too_large:
        raise AnswerTooLarge(f"{argv[0]} printed more than {limit:,} bytes on {too_large[0]}")
    return Ran(proc.returncode, outputs.get("stdout", b"").decode("utf-8", "replace"),
               outputs.get("stderr", b"").decode("utf-8", "replace"))


def kill(proc: subprocess.Popen[Any]) -> None:
    """Kill `proc` and, when it leads a process group of its own (`process_group=0`), what it started: a
    shell script's child would keep the pipe open after the shell is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
            return
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


class Killer:
    """Kills a process at its deadline unless cancelled first; `fired` says whether it did."""

    def __init__(self, proc: subprocess.Popen[Any], seconds: float) -> None:
        self.fired = False
        self._proc = proc
        self._timer = threading.Timer(seconds, self._kill)
        self._timer.daemon = True
        self._timer.start()

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self.fired = True
            kill(self._proc)

    def cancel(self) -> None:
        self._timer.cancel()


def kill_at(proc: subprocess.Popen[Any], seconds: float) -> Killer:
    """Kill `proc` after `seconds` unless cancelled first (a command whose output is streamed, not waited for)."""
    return Killer(proc, seconds)


# -- one POST ---------------------------------------------------------------


def resolve(host: str, port: int, deadline: Deadline) -> list[tuple[Any, ...]]:
    """getaddrinfo's TCP answers for `host`, or CallTimedOut when `deadline` ends first. The lookup runs in a
    worker thread (libc's resolver cannot be interrupted): a slow resolver keeps that thread, never the caller,
    and the thread ends when libc gives up (resolv.conf's timeout and attempts)."""
    found: list[Any] = []

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            found.append(exc)

    worker = threading.Thread(target=lookup, name="preemptlens-resolve", daemon=True)
    worker.start()
    worker.join(deadline.remaining())
    if not found:
        deadline.expire()
        deadline.check()
    if isinstance(found[0], BaseException):
        raise found[0]
    return list(found[0])


def is_public(address: str) -> bool:
    """Whether `address` is one of the internet's: not loopback, private, link-local (cloud metadata), shared,
    reserved, multicast or unspecified; an IPv4 address written as IPv6 counts as itself."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _connect(infos: list[tuple[Any, ...]], deadline: Deadline) -> socket.socket:
    """A socket connected to the first address of `infos` that answers, within `deadline`."""
    error: OSError = OSError("no address to connect to")
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        deadline.watch(sock)  # before any TLS handshake: a handshake can drip too
        try:
            sock.settimeout(max(deadline.remaining(), 0.001))
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            deadline.check()
            error = exc
    raise error


def post(url: str, body: bytes, headers: Mapping[str, str], *, timeout_s: float, limit: int = 65536,
         allow_private: bool = False) -> int:
    """POST `body` to `url` (http or https, no redirect followed) and return the status; the whole exchange,
    name resolution included, ends within `timeout_s` (CallTimedOut) and at most `limit` bytes of the answer's
    body are read. A host that resolves to any address not is_public raises RefusedAddress unless
    `allow_private`."""
    try:
        parts = urllib.parse.urlsplit(url)
        hostname, port = parts.hostname, parts.port
    except ValueError:
        # Its message would quote the URL, which may be a secret.
        raise http.client.InvalidURL("a malformed host or port") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise http.client.InvalidURL("not an http or https URL with a host")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    with Deadline(timeout_s, "the webhook's answer") as deadline:
        infos = resolve(hostname, port or (443 if parts.scheme == "https" else 80), deadline)
        if not allow_private and not all(is_public(str(info[4][0])) for info in infos):
            raise RefusedAddress("the host resolves to a loopback, private or link-local address")
        connection: http.client.HTTPConnection
        # The connection keeps the name (the Host header, TLS's server name and certificate check) and is
        # handed a socket to an address already looked up: no second lookup, outside the deadline or answered
        # differently.
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(hostname, port, timeout=timeout_s,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(hostname, port, timeout=timeout_s)
        connection._create_connection = lambda *_, **__: _connect(infos, deadline)  # type: ignore[attr-defined]
        try:
            try:
                sent = dict(headers)
                if parts.username is not None:
                    import base64

                    pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
                    sent["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
                connection.request("POST", path, body=body, headers=sent)
                response = connection.getresponse()
                response.read(limit)  # the status is the answer; the body is only drained a little
            except (OSError, http.client.HTTPException):
                deadline.check()
                raise
            deadline.check()
            return response.status
        finally:
            connection.close()
