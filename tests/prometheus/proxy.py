"""A multi-tenant gateway in front of the real Prometheus, for the collector's tests.

It behaves as Mimir, Cortex or a Thanos query-frontend do towards a client:
the tenant header X-Scope-OrgID is required (401 without it, 403 for another
tenant), a bearer token is checked, some answers succeed with `warnings` and
miss a series (a partial response: a store did not answer), and the gateway
sheds load with 429 (Retry-After) and 503 on every k-th request, which keeps
the faults deterministic in number whatever the order of concurrent requests.
It records what it saw: method, headers, parameters, arrival time, status,
and the most requests it had in flight at once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import orjson
import requests

PARTIAL_WARNING = "partial response: store 10.0.0.7:10901 did not answer (test gateway)"


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    params: tuple[tuple[str, str], ...]
    at: float
    status: int

    def param(self, name: str) -> str | None:
        return next((v for k, v in self.params if k == name), None)


@dataclass
class TenantGateway:
    upstream: str
    tenant: str = "team-a"
    token: str | None = field(default=None, repr=False)
    throttle_every: int = 0  # every k-th API request is answered 429 with Retry-After
    unavailable_every: int = 0  # every k-th API request is answered 503
    retry_after_s: int = 1
    delay_s: float = 0.0  # added to every forwarded answer, so that overlapping requests overlap
    warn_starts_ms: set[int] = field(default_factory=set)  # query_range windows answered partially
    seen: list[Seen] = field(default_factory=list)
    max_in_flight: int = 0
    _in_flight: int = 0
    _count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> TenantGateway:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                gateway.handle(self)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._count += 1
            number = self._count
        try:
            self._answer(request, number)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, request: BaseHTTPRequestHandler, number: int) -> None:
        arrived = time.monotonic()
        parts = urlsplit(request.path)
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        params = parse_qsl(parts.query) if request.command == "GET" else parse_qsl(body.decode())
        headers = {k.lower(): v for k, v in request.headers.items()}
        status, extra, payload = self._decide(request.command, parts.path, params, headers, number)

        with self._lock:
            self.seen.append(Seen(request.command, parts.path, headers, tuple(params), arrived, status))
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(payload)))
        for name, value in extra.items():
            request.send_header(name, value)
        request.end_headers()
        request.wfile.write(payload)

    def _decide(
        self, method: str, path: str, params: list[tuple[str, str]], headers: dict[str, str], number: int
    ) -> tuple[int, dict[str, str], bytes]:
        def error(kind: str, text: str) -> bytes:
            return orjson.dumps({"status": "error", "errorType": kind, "error": text})

        tenant = headers.get("x-scope-orgid")
        if tenant is None:
            return 401, {}, error("unauthorized", "no org id")
        if tenant != self.tenant:
            return 403, {}, error("forbidden", f"unknown tenant {tenant}")
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return 401, {}, error("unauthorized", "bad or missing bearer token")
        if self.throttle_every and number % self.throttle_every == 0:
            retry = {"Retry-After": str(self.retry_after_s)}
            return 429, retry, error("too_many_requests", "per-tenant query rate limit")
        if self.unavailable_every and number % self.unavailable_every == 0:
            return 503, {}, error("unavailable", "querier pool exhausted")
        upstream = requests.request(
            method,
            f"{self.upstream}{path}",
            params=params if method == "GET" else None,
            data=params if method == "POST" else None,
            timeout=60,
        )
        payload = upstream.content
        start = next((v for k, v in params if k == "start"), None)
        if path.endswith("/query_range") and start and round(float(start) * 1000) in self.warn_starts_ms:
            answer = orjson.loads(payload)
            # The store that did not answer held the first series.
            answer["data"]["result"] = answer["data"]["result"][1:]
            answer["warnings"] = [PARTIAL_WARNING]
            payload = orjson.dumps(answer)
        if self.delay_s:
            time.sleep(self.delay_s)
        return upstream.status_code, {}, payload
