"""HTTP: range queries and series lookups over one session, each bounded in time and size."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn, Self, TypeVar
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit

# _Retry derives from it at import; the rest of the HTTP stack (requests, the Prometheus client) is
# imported where it is used: load_config imports this package for every command.
from urllib3.util.retry import Retry

from preemptlens import outbound, private
from preemptlens.collectors.prometheus.answers import (
    AnswerError,
    RangeAnswer,
    SeriesAnswer,
    error_detail,
    range_result,
    series_result,
)
from preemptlens.collectors.prometheus.queries import MAX_POINTS, Options
from preemptlens.collectors.prometheus.settings import GET_MAX_URL
from preemptlens.errors import SourceError, TransientSourceError

if TYPE_CHECKING:
    import requests
    from urllib3.response import BaseHTTPResponse

log = logging.getLogger(__name__)

_Read = TypeVar("_Read")



def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _Retry(Retry):
    """urllib3's retry with the server's Retry-After capped, and every wait logged:
    a backend that rate-limits says so in the log instead of only slowing down."""

    def __init__(self, *args: Any, max_retry_after: float = 60.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_retry_after = max_retry_after

    def new(self, **kw: Any) -> Self:
        kw.setdefault("max_retry_after", self.max_retry_after)
        return super().new(**kw)

    def get_retry_after(self, response: BaseHTTPResponse) -> float | None:
        after = super().get_retry_after(response)
        return None if after is None else min(after, self.max_retry_after)

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        if response is not None:
            after = self.get_retry_after(response) if self.respect_retry_after_header else None
            wait = f"Retry-After {after:g} s" if after else f"backoff {self.get_backoff_time():g} s"
            log.warning("prometheus: HTTP %d, retrying after %s", response.status, wait)
        super().sleep(response)


class PrometheusSource:
    """Range queries over one HTTP session configured by prometheus-api-client.

    PrometheusConnect sets up the session (auth, TLS, headers, retry with
    backoff); range queries are sent on that session directly so the body is
    read by .answers into columns and errors are reported without the response body.
    The session is shared by the worker threads: its pool keeps one connection
    per request in flight.
    """

    def __init__(self, opts: Options) -> None:
        import requests
        from prometheus_api_client import PrometheusConnect

        self.opts = opts
        self.where = redact_url(opts.url)
        session = requests.Session()
        if opts.ca_file:
            # the bundle decides which server the collector believes: not a file another user can change
            private.refuse_if_others_can_change(opts.ca_file, "prometheus.ca_file",
                                                "own it by root or the service user, not writable by others")
        session.verify = opts.ca_file or opts.verify_tls
        headers = dict(opts.headers)
        if not any(k.lower() == "accept-encoding" for k in headers):
            # Prometheus gzips an answer at about 8 MB/s, three quarters of the CPU it spends on a
            # range query here, so asking for it only pays over links slower than ~60 Mbit/s; a
            # `headers` entry Accept-Encoding = "gzip" asks for it again.
            headers["Accept-Encoding"] = "identity"
        if opts.tenant:
            headers = {k: v for k, v in headers.items() if k.lower() != "x-scope-orgid"}
            headers["X-Scope-OrgID"] = opts.tenant
        if opts.bearer_token is not None:
            headers["Authorization"] = f"Bearer {opts.bearer_token.reveal()}"
        auth = None
        parts = urlsplit(opts.url)
        if opts.username:
            auth = (opts.username, opts.password.reveal() if opts.password else "")
        elif parts.username:
            auth = (unquote(parts.username), unquote(parts.password or ""))
        retry = _Retry(
            total=opts.retries,
            connect=opts.retries,
            read=1,
            status=opts.retries,
            backoff_factor=opts.backoff_s,
            status_forcelist=(429, 502, 503, 504),
            allowed_methods=frozenset({"GET", "POST"}),
            raise_on_status=False,
            max_retry_after=opts.max_retry_after_s,
        )
        self.client = PrometheusConnect(
            url=self.where,
            headers=headers,
            retry=retry,
            auth=auth,
            session=session,
            timeout=opts.timeout_s,
            method="GET" if opts.method == "get" else "POST",
        )
        # The client mounts an adapter pooling 10 connections; more threads than that would
        # open and drop a connection per request.
        # Its connections report their sockets to the request's deadline (preemptlens.outbound).
        session.mount(self.where, outbound.bounded_adapter(max_retries=retry, pool_maxsize=max(opts.concurrency, 10)))
        self.session = session

    def close(self) -> None:
        self.client.close()

    def method_for(self, path: str, data: Sequence[tuple[str, str]]) -> str:
        """GET or POST for this request: POST when the URL would be too long for proxies."""
        if self.opts.method != "auto":
            return self.opts.method.upper()
        url = f"{self.client.url}{path}?{urlencode(data)}"
        return "GET" if len(url) <= GET_MAX_URL else "POST"

    def _send(self, path: str, data: Sequence[tuple[str, str]], what: str) -> bytearray:
        """The body of a successful answer, unparsed."""
        import requests
        from urllib3.exceptions import ReadTimeoutError

        method = self.method_for(path, data)
        deadline = outbound.Deadline(self.opts.timeout_s, what)
        try:
            with deadline.current():
                response = self.session.request(
                    method,
                    f"{self.client.url}{path}",
                    params=data if method == "GET" else None,
                    data=data if method == "POST" else None,
                    headers=self.client.headers,
                    auth=self.client.auth,
                    timeout=self.opts.timeout_s,
                    stream=True,
                )
                body = _read_capped(response, self.opts.max_response_bytes, deadline)
        except outbound.AnswerTooLarge:
            raise SourceError(
                f"Prometheus at {self.where} answered {what} with more than {self.opts.max_response_bytes:,} bytes",
                "lower prometheus.page_points or narrow prometheus.selector (or raise prometheus.max_response_bytes)",
            ) from None
        except (outbound.CallTimedOut, requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError) as exc:
            if not deadline.expired:
                raise TransientSourceError(
                    f"Prometheus at {self.where} broke off its answer to {what} ({type(exc).__name__})",
                    "a re-run resumes after the last committed page",
                ) from None
            raise TransientSourceError(
                f"Prometheus at {self.where} did not answer {what} within {self.opts.timeout_s:g} s",
                "raise prometheus.timeout_s or lower prometheus.page_points; "
                "a re-run resumes after the last committed page",
            ) from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            # Once read retries run out, requests reports a read timeout as a ConnectionError; a socket the
            # deadline shut down ends as a broken connection.
            reason = getattr(exc.args[0], "reason", None) if exc.args else None
            if isinstance(exc, requests.ReadTimeout) or isinstance(reason, ReadTimeoutError) or deadline.expired:
                raise TransientSourceError(
                    f"Prometheus at {self.where} did not answer {what} within {self.opts.timeout_s:g} s",
                    "raise prometheus.timeout_s or lower prometheus.page_points; "
                    "a re-run resumes after the last committed page",
                ) from None
            raise TransientSourceError(
                f"cannot reach Prometheus at {self.where} ({type(reason or exc).__name__}, "
                f"after {self.opts.retries} retries) for {what}",
                "check prometheus.url and that the server is up; a re-run resumes after the last committed page",
            ) from None
        finally:
            deadline.close()
        if response.status_code == 200:
            return body
        self._fail(response, body, what)

    def _fail(self, response: requests.Response, body: bytearray, what: str) -> NoReturn:
        status = response.status_code
        error = error_detail(body) or response.reason or "no detail"
        said = f"Prometheus at {self.where} answered HTTP {status} ({error}) to {what}"
        if status == 400:
            raise SourceError(
                said,
                "the query or window is invalid: fix prometheus.selector / the *_metric or *_query settings; "
                f"a page may ask for at most {MAX_POINTS} points per series (prometheus.page_points)",
            )
        if status == 422:
            raise SourceError(
                said,
                "the server could not execute the query (too many samples or its own timeout): "
                "lower prometheus.page_points or narrow prometheus.selector",
            )
        if status in (401, 403):
            raise SourceError(
                said,
                "check prometheus.tenant (sent as X-Scope-OrgID; multi-tenant backends require it), "
                "prometheus.bearer_token or prometheus.username/password",
            )
        if status in (429, 502, 503, 504):
            raise TransientSourceError(
                f"{said}, still after {self.opts.retries} retries",
                "the server is overloaded or restarting: run again later; it resumes after the last committed page",
            )
        raise SourceError(said, "check prometheus.url points at the Prometheus HTTP API")

    def query_range(self, stream: str, query: str, start_ms: int, end_ms: int) -> bytearray:
        """The answer's body, unparsed: `range_result` reads it (`read_range` does both)."""
        what = range_what(stream, query, start_ms, end_ms)
        return self._send(
            "/api/v1/query_range",
            [
                ("query", query),
                ("start", f"{start_ms / 1000:.3f}"),
                ("end", f"{end_ms / 1000:.3f}"),
                ("step", f"{self.opts.step_ms / 1000:g}"),
            ],
            what,
        )

    def read_range(self, stream: str, query: str, start_ms: int, end_ms: int) -> RangeAnswer:
        """A query_range answer read; one that cannot be read at all is a SourceError naming the query."""
        return self.read(range_result, self.query_range(stream, query, start_ms, end_ms),
                         range_what(stream, query, start_ms, end_ms))

    def series(self, metrics: Sequence[str], start_ms: int, end_ms: int) -> SeriesAnswer:
        """The series of `metrics` with samples in the window (index only, no samples read). Backends may
        list more (series with no sample in it), never fewer."""
        what = f"the series lookup of {', '.join(metrics)} over [{iso(start_ms)}, {iso(end_ms)}]"
        body = self._send(
            "/api/v1/series",
            [
                *(("match[]", m) for m in metrics),
                ("start", f"{start_ms / 1000:.3f}"),
                ("end", f"{end_ms / 1000:.3f}"),
            ],
            what,
        )
        return self.read(series_result, body, what)

    def series_count(self, metrics: Sequence[str], start_ms: int, end_ms: int) -> int:
        """How many series of `metrics` exist in the window."""
        listed = self.series(metrics, start_ms, end_ms)
        return len(listed.labels) + listed.unreadable

    def read(self, reader: Callable[[bytearray, str], _Read], body: bytearray, what: str) -> _Read:
        """`reader(body, what)`, an answer that cannot be read at all made a SourceError (one line)."""
        try:
            return reader(body, what)
        except AnswerError as exc:
            raise SourceError(
                f"Prometheus at {self.where}: {exc}",
                "check that prometheus.url points at the Prometheus HTTP API (or a server that speaks it)",
            ) from None


def range_what(stream: str, query: str, start_ms: int, end_ms: int) -> str:
    """A query_range request as messages name it."""
    return f"the {stream} query {query!r} over [{iso(start_ms)}, {iso(end_ms)}]"


def _read_capped(response: requests.Response, limit: int, deadline: outbound.Deadline) -> bytearray:
    """The body, at most `limit` bytes (outbound.AnswerTooLarge beyond), before `deadline`: as
    outbound.read_capped, but grown in one buffer (joining chunks would hold the answer twice)."""
    import http.client

    body = bytearray()
    try:
        for chunk in response.iter_content(1 << 20):
            if len(body) + len(chunk) > limit:
                raise outbound.AnswerTooLarge(f"the answer is larger than {limit:,} bytes")
            body += chunk
            deadline.check()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # A socket the deadline shut down ends the read with a broken connection: say what happened.
        if not isinstance(exc, outbound.AnswerTooLarge):
            deadline.check()
        raise
    deadline.check()
    return body
