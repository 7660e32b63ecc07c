"""Real HTTP peers that misbehave, on loopback sockets: one that answers a byte at a time and never finishes,
one that answers an endless (or 400 MB) body as fast as it is read. Used by tests/test_outbound.py and
benchmarks/bench_soak.py."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType


class Peer:
    """A TCP server on 127.0.0.1 handling each connection on a thread of its own; `sent` counts the bytes it
    managed to send, `connections` the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.sent = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(1.0)
        try:
            request = b""
            deadline = time.monotonic() + 5
            while b"\r\n\r\n" not in request and time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    request += chunk
            self.answer(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        with self._lock:
            self.sent += len(data)

    def answer(self, conn: socket.socket) -> None:
        raise NotImplementedError

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(2)

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class Drip(Peer):
    """Answers `text` one byte every `interval` seconds (a status line and headers that never end, by default):
    each read returns quickly, so only a total deadline stops a client."""

    def __init__(self, text: bytes = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + b"X-Slow: y\r\n" * 10_000,
                 interval: float = 0.5) -> None:
        self.text = text
        self.interval = interval
        super().__init__()

    def answer(self, conn: socket.socket) -> None:
        for byte in self.text:
            if self.stopped:
                return
            self.send(conn, bytes([byte]))
            time.sleep(self.interval)


class Huge(Peer):
    """Answers `status` with a body of `size` bytes (Content-Length says so) sent as fast as it is read."""

    def __init__(self, size: int = 400 * 10**6, status: int = 200, content_type: str = "application/json") -> None:
        self.size = size
        self.status = status
        self.content_type = content_type
        super().__init__()

    def answer(self, conn: socket.socket) -> None:
        self.send(conn, f"HTTP/1.1 {self.status} X\r\nContent-Type: {self.content_type}\r\n"
                        f"Content-Length: {self.size}\r\n\r\n".encode())
        block = b"[" + b" " * (1 << 20 - 1)
        left = self.size
        while left > 0 and not self.stopped:
            piece = block[:left]
            self.send(conn, piece)
            left -= len(piece)
