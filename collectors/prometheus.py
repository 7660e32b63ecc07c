"""GPU busy, memory and power from DCGM metrics in Prometheus (or Thanos, Mimir, VictoriaMetrics).

Every metric is downsampled on the server to the collection step: the value
at time t summarises the raw samples in (t - step, t] (`avg_over_time` for
busy and power, `max_over_time` for memory by default). The window is written
as step minus one millisecond because Prometheus 2.x range selectors include
their left edge and 3.x do not; with millisecond timestamps both then read
exactly (t - step, t], so no raw sample counts in two steps. Range selectors
also only see samples inside the window, so a series that stopped (a job that
ended; backfilled history has no staleness markers) adds no phantom points.

Range queries are paged: a page asks for at most `page_points` (<= 11,000)
points per series, and page i covers [t0 + i*N*step, t0 + (i*N + N - 1)*step]
so that no boundary point is read twice. A page asks for busy, memory and
power, and for the fallback busy metric only where the busy metric lacks
values, and for raw sample counts only where series share a GPU-step (see
`Staged`). Each page becomes one batch holding the three metrics of its
window in one gpu_samples frame, plus the watermarks (one per cluster and
metric) of that page, so a crash loses at most the page in flight and a
re-run resumes after the last committed page.

Multi-tenant backends (Thanos, Mimir, Cortex, VictoriaMetrics) speak the same
API with a few additions this module handles: the tenant header
(X-Scope-OrgID), bearer tokens, POST for queries too long for a URL, answers
that succeed with `warnings` (a partial response: some store or ingester did
not answer) and rate limiting (429 with Retry-After). The requests of several
pages are in flight at once, at most `concurrency` of them, but pages are
handed over strictly in order, so the watermark only ever moves forward.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time as clock
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Self
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit

import orjson
import polars as pl

# _Retry derives from it at import; the rest of the HTTP stack (requests, the Prometheus client) and
# numpy are imported where they are used: load_config imports this module for every command.
from urllib3.util.retry import Retry

from preemptlens import outbound
from preemptlens.config import (
    ClusterSettings,
    Config,
    Secret,
    duration_text,
    http_url,
    number_argument,
    parse_size,
    section,
    setting,
    size_text,
    text_argument,
)
from preemptlens.contract import Batch, Reject, Watermark
from preemptlens.errors import ConfigError, SourceError, TransientSourceError
from preemptlens.times import TIME_HELP, parse_duration_ms, parse_when

if TYPE_CHECKING:
    import numpy as np
    import requests
    from urllib3.response import BaseHTTPResponse

log = logging.getLogger(__name__)

NAME = "prometheus"
TABLE = "gpu_samples"
MAX_POINTS = 11_000  # Prometheus refuses more points per series in one range query
# Longest request URL sent as GET under method "auto". Proxies and gateways in front of
# multi-tenant backends commonly cap the request line at 4-8 KiB (HTTP 414 beyond).
GET_MAX_URL = 2048
# Watermark streams, one per contract column a metric fills.
STREAMS = ("busy", "mem_used_mib", "power_w")
# A page's series lookup of the busy fallback metric, beside its queries.
_FALLBACK_SERIES = "fallback series"


@section(NAME, "Collect DCGM GPU metrics from anything that serves the Prometheus HTTP API.")
@dataclass(frozen=True)
class PrometheusSettings:
    url: str = setting(
        "http://127.0.0.1:9090",
        "Base URL of the Prometheus HTTP API (Prometheus, Thanos, Mimir...).",
        check=http_url,
    )
    bearer_token: Secret | None = setting(
        None,
        "Bearer token sent as `Authorization: Bearer ...`; give it as "
        '`{ "$env" = "NAME" }`, `{ "$file" = "/path" }` or PREEMPTLENS_PROMETHEUS__BEARER_TOKEN.',
    )
    tenant: str = setting(
        "",
        "Tenant sent as the X-Scope-OrgID header (Mimir, Cortex, Thanos receive/query-frontend); "
        "empty: none.",
    )
    username: str | None = setting(None, "User name for HTTP basic auth.")
    password: Secret | None = setting(None, "Password for HTTP basic auth.")
    headers: dict[str, Any] = setting(
        {},
        "Extra HTTP headers, e.g. X-Scope-OrgID for Mimir (not secret; use bearer_token or password for those). "
        'Answers are asked for uncompressed (gzip costs the server most of a query\'s CPU); '
        'add "Accept-Encoding" = "gzip" over a slow link.',
    )
    verify_tls: bool = setting(True, "Verify the server's TLS certificate.")
    ca_file: str = setting("", "CA bundle that signs the server's certificate (empty: the system CAs).")
    timeout_s: float = setting(
        120.0,
        "Seconds one HTTP request may take in all, its retries and the whole answer included; a server that "
        "answers slowly is cut off then.",
        bounds=(1, 3600),
    )
    max_response_bytes: str = setting(
        "2GB",
        "Largest answer read from the server (one page of one query); a larger one is an error, never read "
        "whole into memory (lower prometheus.page_points or narrow the selector).",
        check=size_text(2**20, 2**40),
    )
    method: str = setting(
        "auto",
        f"HTTP method of queries: auto sends GET unless the URL would exceed {GET_MAX_URL} characters, "
        "then POST (long expressions); post always POSTs; get always GETs.",
        choices=("auto", "post", "get"),
    )
    concurrency: int = setting(
        4,
        "Most requests in flight at once (the queries of the next pages are sent while one is loaded); "
        "1 sends them one after another.",
        bounds=(1, 64),
    )
    retries: int = setting(
        4, "Retries of a request that failed transiently (connection, 429, 502-504).",
        bounds=(0, 20),
    )
    backoff_s: float = setting(1.0, "Backoff factor between retries: waits grow 1x, 2x, 4x... this.", bounds=(0, 60))
    max_retry_after_s: float = setting(
        60.0,
        "Longest wait honoured from a Retry-After header (429, 503); longer asks are cut to this.",
        bounds=(0, 3600),
    )
    step: str = setting(
        "1m", "Collection step: one gpu_samples row per GPU and step (Prometheus duration).",
        check=duration_text(1, 86_400),
    )
    safety_lag: str = setting(
        "5m", "An incremental run collects up to now minus this, so late samples land first.",
        check=duration_text(0, 86_400),
    )
    initial_window: str = setting(
        "1d", "How far back the first run collects when there is no watermark yet.",
        check=duration_text(60, 366 * 86_400),
    )
    page_points: int = setting(
        1440, "Points per series per range query (at most 11000); bounds memory.",
        bounds=(1, 11_000),
    )
    selector: str = setting("", 'Label matchers added to every metric, e.g. cluster="a100",job="dcgm".')
    busy_metric: str = setting("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Busy signal, a 0-1 ratio.")
    busy_fallback_metric: str = setting(
        "DCGM_FI_DEV_GPU_UTIL",
        "Busy signal where busy_metric is absent (consumer GPUs); empty: no fallback.",
    )
    busy_fallback_scale: float = setting(
        0.01, "Factor from busy_fallback_metric to a 0-1 ratio.",
        bounds=(0, 1_000_000),
    )
    mem_metric: str = setting("DCGM_FI_DEV_FB_USED", "GPU memory used, in MiB.")
    mem_aggregation: str = setting("max", "How memory is summarised over a step.", choices=("max", "avg"))
    power_metric: str = setting("DCGM_FI_DEV_POWER_USAGE", "Power draw, in W.")
    busy_query: str = setting("", "PromQL replacing the built busy query; `$window` stands for the step window.")
    mem_query: str = setting("", "PromQL replacing the built memory query; `$window` as above.")
    power_query: str = setting("", "PromQL replacing the built power query; `$window` as above.")


SETTINGS = PrometheusSettings

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
def parse_time(text: str, option: str) -> int:
    """A time as operators type it (preemptlens.times), in epoch milliseconds."""
    return round(parse_when(text, option).timestamp() * 1000)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# -- labels ------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSeries:
    host: str
    gpu_uuid: str
    gpu_instance: str
    gpu_index: int | None
    job_id: str | None


def _first(labels: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def job_of(labels: Mapping[str, str]) -> str | None:
    """The workload a GPU series is attributed to by its labels, if any.

    Slurm mappings name the job directly. Kubernetes pods are reported as
    "namespace/pod". Behind a ServiceMonitor (it adds `service` and `endpoint`
    target labels) `pod`/`namespace` name the exporter itself and the
    workload is only ever the `exported_` one.
    """
    job = _first(labels, "hpc_job", "jobid")
    if job:
        return job
    candidates = [("exported_pod", "exported_namespace")]
    if not ("service" in labels and "endpoint" in labels):
        candidates += [("pod", "namespace"), ("pod_name", "pod_namespace")]
    for pod_label, namespace_label in candidates:
        pod = labels.get(pod_label)
        if pod:
            namespace = labels.get(namespace_label)
            return f"{namespace}/{pod}" if namespace else pod
    return None


def normalise(labels: Mapping[str, str]) -> GpuSeries | tuple[str, str]:
    """The GPU a series describes, or (field, reason) when it cannot be told."""
    host = _first(labels, "Hostname", "hostname")
    if host is None and labels.get("instance"):
        # Exporters without a host label (jobstats' GPU exporter) are told apart by their target.
        host = labels["instance"].rsplit(":", 1)[0]
    if host is None:
        return "Hostname", "series has no Hostname, hostname or instance label"
    uuid = _first(labels, "UUID", "uuid")
    if uuid is None:
        return "UUID", "series has no UUID label"
    index_text = _first(labels, "gpu", "minor_number")
    # isdigit() alone takes "²" and "١"; and gpu_index is an INTEGER.
    index = int(index_text) if index_text and index_text.isascii() and index_text.isdigit() else None
    if index is not None and index > _MAX_GPU_INDEX:
        index = None
    return GpuSeries(host, uuid, labels.get("GPU_I_ID", ""), index, job_of(labels))


# -- options -----------------------------------------------------------------


def _quote(text: str) -> str:
    """A PromQL string literal (JSON's escapes are Go's)."""
    return orjson.dumps(text).decode()


def gpu_matchers(series: Iterable[Mapping[str, str]]) -> list[str]:
    """Label matchers that select every series of the GPUs these series describe, by the UUID
    label `normalise` reads; [""] (no restriction) when one of them has none."""
    uuids: dict[str, set[str]] = {}
    for labels in series:
        name = next((n for n in ("UUID", "uuid") if labels.get(n)), None)
        if name is None:
            return [""]
        uuids.setdefault(name, set()).add(labels[name])
    return [f"{name}=~{_quote('|'.join(map(re.escape, sorted(values))))}" for name, values in uuids.items()]


@dataclass(frozen=True)
class Staged:
    """The built busy query `avg(busy) or avg(fallback) * scale`, asked for in parts.

    PromQL's `a or b` is, per label set and step, a where it has a value and b
    elsewhere: a together with `b unless a`. avg_over_time drops the metric
    name, so the busy and fallback series of one GPU share a label set. Each
    page asks for the busy metric alone, and the `unless` part only when a
    fallback series exists in the page whose label set lacks busy values at
    some step. Its values are scaled here: the server prints the shortest text
    that reads back as the same double, so the product is the server's bit for
    bit. The raw sample counts that weigh series sharing a GPU-step are asked
    for only where that happens.
    """

    busy_metric: str
    fallback_metric: str  # empty: no fallback
    fallback_scale: float
    selector: str
    window: str

    def _range(self, metric: str, matcher: str) -> str:
        inner = ",".join(m for m in (self.selector, matcher) if m)
        return f"{metric}{{{inner}}}[{self.window}]"

    def fill_query(self, matchers: Sequence[str]) -> str:
        """The fallback's values where the busy metric has none (unscaled)."""
        f, b = self.fallback_metric, self.busy_metric
        parts = [f"avg_over_time({self._range(f, m)}) unless avg_over_time({self._range(b, m)})" for m in matchers]
        return " or ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]

    def weight_query(self, matchers: Sequence[str]) -> str:
        """Raw samples per series and step of what the busy query reads, busy metric first."""
        metrics = [m for m in (self.busy_metric, self.fallback_metric) if m]
        return " or ".join(f"count_over_time({self._range(metric, m)})" for metric in metrics for m in matchers)


@dataclass(frozen=True)
class Options:
    url: str
    cluster: str
    step_ms: int
    safety_lag_ms: int
    initial_window_ms: int
    page_points: int
    queries: dict[str, str]  # stream -> PromQL, sent for every page
    weight_query: str  # sent for every page unless `staged`
    known_metrics: tuple[str, ...]  # metric names the built busy query reads
    staged: Staged | None = None  # the built busy query, asked for in stages; None: a custom busy_query
    selector: str = ""
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 1.0
    headers: dict[str, str] = field(default_factory=dict)
    tenant: str = ""
    method: str = "auto"
    concurrency: int = 4
    max_retry_after_s: float = 60.0
    bearer_token: Secret | None = None
    username: str | None = None
    password: Secret | None = None
    verify_tls: bool = True
    ca_file: str = ""
    mem_aggregation: str = "max"
    max_response_bytes: int = 2 * 10**9


def _metric(name: str, key: str) -> str:
    if not _METRIC_NAME.match(name):
        raise ConfigError(
            f"prometheus.{key}: {name!r} is not a metric name", "use the exporter's metric name"
        )
    return name


def options_from(settings: PrometheusSettings, cluster: str) -> Options:
    step_ms = parse_duration_ms(settings.step, "prometheus.step")
    if step_ms < 1000:
        raise ConfigError(
            f"prometheus.step: {settings.step!r} is under a second", "use 1m (the default) or 30s"
        )
    points = settings.page_points
    if not 1 <= points <= MAX_POINTS:
        raise ConfigError(
            f"prometheus.page_points: {points} is not between 1 and {MAX_POINTS}",
            f"Prometheus refuses range queries of more than {MAX_POINTS} points per series",
        )
    selector = settings.selector.strip()
    if "{" in selector or "}" in selector:
        raise ConfigError(
            f"prometheus.selector: {selector!r} has braces", 'give only the matchers: cluster="a100"'
        )
    window = f"{step_ms - 1}ms"

    def sel(metric: str) -> str:
        return f"{metric}{{{selector}}}[{window}]"

    busy, fallback = _metric(settings.busy_metric, "busy_metric"), settings.busy_fallback_metric or ""
    if fallback:
        fallback = _metric(fallback, "busy_fallback_metric")
    mem, power = _metric(settings.mem_metric, "mem_metric"), _metric(settings.power_metric, "power_metric")
    staged = Staged(busy, fallback, settings.busy_fallback_scale, selector, window)
    built = {
        "busy": f"avg_over_time({sel(busy)})",
        "mem_used_mib": f"{settings.mem_aggregation}_over_time({sel(mem)})",
        "power_w": f"avg_over_time({sel(power)})",
    }
    custom = {"busy": settings.busy_query, "mem_used_mib": settings.mem_query, "power_w": settings.power_query}
    queries = {
        stream: query.replace("$window", window) if query else built[stream]
        for stream, query in custom.items()
    }
    headers = {str(k): str(v) for k, v in settings.headers.items()}
    tenant = (settings.tenant or "").strip()
    given = {k.lower(): v for k, v in headers.items()}.get("x-scope-orgid")
    if tenant and given is not None and given != tenant:
        raise ConfigError(
            f"prometheus.tenant {tenant!r} and prometheus.headers X-Scope-OrgID {given!r} differ",
            "set the tenant in one place: prometheus.tenant",
        )
    concurrency = settings.concurrency
    if concurrency < 1:
        raise ConfigError(f"prometheus.concurrency: {concurrency} is under 1", "use 1 (serial) or more")
    return Options(
        url=settings.url.rstrip("/"),
        cluster=cluster,
        step_ms=step_ms,
        safety_lag_ms=parse_duration_ms(settings.safety_lag, "prometheus.safety_lag"),
        initial_window_ms=parse_duration_ms(settings.initial_window, "prometheus.initial_window"),
        page_points=points,
        queries=queries,
        weight_query=staged.weight_query([""]),
        known_metrics=tuple(m for m in (busy, fallback) if m) if not settings.busy_query else (),
        staged=None if settings.busy_query else staged,
        selector=selector,
        timeout_s=settings.timeout_s,
        retries=settings.retries,
        backoff_s=settings.backoff_s,
        headers=headers,
        tenant=tenant,
        method=settings.method,
        concurrency=concurrency,
        max_retry_after_s=settings.max_retry_after_s,
        bearer_token=settings.bearer_token,
        username=settings.username,
        password=settings.password,
        verify_tls=settings.verify_tls,
        ca_file=settings.ca_file or "",
        mem_aggregation=settings.mem_aggregation,
        max_response_bytes=parse_size(settings.max_response_bytes) or Options.max_response_bytes,
    )


# -- HTTP --------------------------------------------------------------------


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
    parsed with orjson and errors are reported without the response body.
    The session is shared by the worker threads: its pool keeps one connection
    per request in flight.
    """

    def __init__(self, opts: Options) -> None:
        import requests
        from prometheus_api_client import PrometheusConnect

        self.opts = opts
        self.where = redact_url(opts.url)
        session = requests.Session()
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

    def _send(self, path: str, data: Sequence[tuple[str, str]], what: str) -> bytes:
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
                body = outbound.read_capped(response.iter_content(1 << 20), self.opts.max_response_bytes, deadline)
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

    def _fail(self, response: requests.Response, body: bytes, what: str) -> NoReturn:
        status = response.status_code
        try:
            detail = orjson.loads(body)
            error = f"{detail.get('errorType', '')}: {detail.get('error', '')}"
        except orjson.JSONDecodeError:
            error = response.reason or "no detail"
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

    def query_range(self, stream: str, query: str, start_ms: int, end_ms: int) -> bytes:
        """The answer's body, unparsed: `range_result` reads it."""
        what = f"the {stream} query {query!r} over [{iso(start_ms)}, {iso(end_ms)}]"
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

    def series(self, metrics: Sequence[str], start_ms: int, end_ms: int) -> bytes:
        """The answer's body listing the series of `metrics` with samples in the window (index
        only, no samples read). Backends may list more (series with no sample in it), never fewer."""
        return self._send(
            "/api/v1/series",
            [
                *(("match[]", m) for m in metrics),
                ("start", f"{start_ms / 1000:.3f}"),
                ("end", f"{end_ms / 1000:.3f}"),
            ],
            f"the series lookup of {', '.join(metrics)} over [{iso(start_ms)}, {iso(end_ms)}]",
        )

    def series_count(self, metrics: Sequence[str], start_ms: int, end_ms: int) -> int:
        """How many series of `metrics` exist in the window."""
        return len(orjson.loads(self.series(metrics, start_ms, end_ms))["data"])


@dataclass(frozen=True)
class RangeAnswer:
    """A query_range answer: each series' labels and point count, all points in one frame."""

    metrics: list[dict[str, str]]
    counts: np.ndarray  # points per series, in the order of `metrics`
    samples: pl.DataFrame  # t (epoch ms), value; series after series
    warnings: list[str]


# GPU and time in one integer, so that the per-row joins and groupings are on one column:
# epoch milliseconds fit in 42 bits until the year 2109.
_T_BITS = 1 << 42
_MAX_GPU_INDEX = 2**31 - 1

_VALUES = re.compile(rb'"values"\s*:\s*\[')
_SAMPLE_SCHEMA = {"t": pl.Float64, "value": pl.Float64}


def _split_values(body: bytes) -> tuple[Any, np.ndarray, pl.DataFrame]:
    """The answer without its points, the points per series, and all points in one frame."""
    import numpy as np

    skeleton_parts, segments = [], []
    at = 0
    for match in _VALUES.finditer(body):
        begin = match.end()
        # Values are numbers and quoted numbers, so the first `]]` closes the array.
        end = begin if body[begin : begin + 1] == b"]" else body.index(b"]]", begin) + 1
        skeleton_parts.append(body[at:begin])
        segments.append(body[begin:end])
        at = end
    skeleton_parts.append(body[at:])
    answer = orjson.loads(b"".join(skeleton_parts))
    counts = np.fromiter((seg.count(b"[") for seg in segments), dtype=np.int64, count=len(segments))
    text = b"\n".join(seg for seg in segments if seg).replace(b"],[", b"\n").translate(None, b'"[]')
    samples = (
        pl.read_csv(text, has_header=False, new_columns=["t", "value"], schema=_SAMPLE_SCHEMA)
        if text
        else pl.DataFrame(schema=_SAMPLE_SCHEMA)
    )
    if len(answer["data"]["result"]) != len(segments) or samples.height != int(counts.sum()):
        raise ValueError("the values arrays were not cut where the series are")
    return answer, counts, samples


def range_result(body: bytes) -> RangeAnswer:
    """`read_range_result`, with an answer that is not a query_range result in Prometheus' shape
    made a SourceError naming what is wrong (the exception's class: the body may be huge)."""
    try:
        return read_range_result(body)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError,
            pl.exceptions.PolarsError) as exc:
        raise SourceError(
            f"prometheus: a query_range answer cannot be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:120] if str(exc) else 'malformed'})",
            "check that prometheus.url points at the Prometheus HTTP API (or a server that speaks it)",
        ) from None


def read_range_result(body: bytes) -> RangeAnswer:
    """Read a query_range answer without a Python object per point.

    The `values` arrays (`[[1733000000,"0.25"],...]`, the bulk of the body) are
    cut out and read as one CSV by polars; the rest, the labels, is small and
    read by orjson. A string in JSON cannot hold `"values":[` unescaped, so the
    cut is exact for the compact JSON that Prometheus and its kin write; a
    body formatted otherwise (spaces, line breaks) is read whole by orjson.

    Prometheus, Thanos (partial responses), Mimir and Cortex put warnings in
    `warnings`; VictoriaMetrics' cluster flags a partial answer `isPartial`.
    """
    import numpy as np

    try:
        answer, counts, samples = _split_values(body)
    except (ValueError, pl.exceptions.PolarsError):
        answer = orjson.loads(body)
        series = answer["data"]["result"]
        counts = np.array([len(one["values"]) for one in series], dtype=np.int64)
        points = [point for one in series for point in one["values"]]
        samples = pl.DataFrame(
            {"t": [float(p[0]) for p in points], "value": [float(p[1]) for p in points]}, schema=_SAMPLE_SCHEMA
        )
    warnings = [str(w) for w in answer.get("warnings") or ()]
    if answer.get("isPartial"):
        warnings.append("isPartial: some storage nodes did not answer")
    return RangeAnswer(
        metrics=[one["metric"] for one in answer["data"]["result"]],
        counts=counts,
        # A time outside what the GPU-and-time key holds (1970 to 2109, see _T_BITS) is NULL here
        # and quarantined by PageParser.points; casting it would overflow and lose the page.
        samples=samples.select(
            pl.when(pl.col("t").is_between(0, (_T_BITS - 1) / 1000))
            .then((pl.col("t") * 1000).round())
            .cast(pl.Int64)
            .alias("t"),
            "value",
        ),
        warnings=warnings,
    )


# -- frames ------------------------------------------------------------------


def series_key(labels: Mapping[str, str]) -> str:
    """A label set as one string, the same whatever the order of its labels."""
    return orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()


class PageParser:
    """Turns the query results of one page into compact frames.

    Series (by their full label set) and GPUs (host, UUID, MIG instance) get
    small integer ids, so joins and groupings over hundreds of thousands of
    points run on integers; the strings are attached once per GPU at the end.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.series: dict[str, int] = {}
        self.labels: list[dict[str, str]] = []  # by sid
        self.series_rows: list[tuple[int, int, int | None, str | None]] = []  # sid, gid, gpu index, job
        self.gpus: dict[tuple[str, str, str], int] = {}
        self.rejects: dict[str, Reject] = {}

    def _sid(self, labels: dict[str, str], stream: str) -> int | None:
        key = series_key(labels)
        sid = self.series.get(key)
        if sid is not None:
            return sid
        gpu = normalise(labels)
        if isinstance(gpu, tuple):
            # A series that cannot be normalised is quarantined once, not once per metric.
            reason = f"{gpu[1]} ({stream} query, {self.where})"
            self.rejects.setdefault(key, Reject(TABLE, f"series {key}", gpu[0], reason, key))
            return None
        gid = self.gpus.setdefault((gpu.host, gpu.gpu_uuid, gpu.gpu_instance), len(self.gpus))
        sid = self.series[key] = len(self.series)
        self.labels.append(labels)
        self.series_rows.append((sid, gid, gpu.gpu_index, gpu.job_id))
        return sid

    def points(self, answer: RangeAnswer, stream: str) -> pl.DataFrame:
        """One row per (series, step) of a query_range answer: sid, t (epoch ms), value."""
        import numpy as np

        sids = [self._sid(labels, stream) for labels in answer.metrics]
        sid = np.repeat(np.array([-1 if s is None else s for s in sids], dtype=np.int32), answer.counts)
        frame = answer.samples.with_columns(pl.Series("sid", sid, dtype=pl.Int32)).filter(pl.col("sid") >= 0)
        untimed = frame.filter(pl.col("t").is_null())
        if untimed.height:
            for one, n in untimed.group_by("sid").len().iter_rows():
                key = series_key(self.labels[one])
                self.rejects.setdefault(f"{key} time {stream}", Reject(
                    TABLE, f"series {key}", "time",
                    f"{n} point(s) with a time that is not epoch seconds from 1970 to 2109 "
                    f"({stream} query, {self.where})", key))
            frame = frame.filter(pl.col("t").is_not_null())
        return frame.select("sid", "t", "value")

    def series_frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            self.series_rows,
            schema={"sid": pl.Int32, "gid": pl.Int32, "gpu_index": pl.Int32, "job_id": pl.String},
            orient="row",
        )

    def gpu_frame(self) -> pl.DataFrame:
        rows = [(gid, *ident) for ident, gid in self.gpus.items()]
        schema = {"gid": pl.Int32, "host": pl.String, "gpu_uuid": pl.String, "gpu_instance": pl.String}
        return pl.DataFrame(rows, schema=schema, orient="row")


def resolve(
    frame: pl.DataFrame, series: pl.DataFrame, weights: pl.DataFrame, step_ms: int, how: str
) -> pl.DataFrame:
    """One value and job per GPU and step where several series describe the same GPU.

    That happens at a job boundary (the old job's series and the new one's
    both have samples in the step) and with shared GPUs (one series per job).
    Values combine as the step's true aggregate (`weight` = raw samples per
    series and step). The job is the one that holds the GPU at the step's end:
    the series that goes on in the next step and did not exist in the previous
    one ranks first; jobs that tie are all named, sorted, comma-separated.

    `series` is indexed by sid (row i describes sid i), so its columns are
    gathered rather than joined. Returns key (GPU and time), gpu_index, job_id, value.
    """
    sid = frame["sid"]
    frame = frame.with_columns(
        (series["gid"].gather(sid).cast(pl.Int64) * _T_BITS + pl.col("t")).alias("key"),
        series["gpu_index"].gather(sid).alias("gpu_index"),
        series["job_id"].gather(sid).alias("job_id"),
    )
    cols = ["key", "gpu_index", "job_id", "value"]
    dup = duplicated(frame["key"], step_ms)
    if not dup.any():
        return frame.select(cols)
    many = frame.filter(dup)
    # Presence in the neighbouring steps is read from the whole page, not just the duplicated rows.
    present = frame.filter(pl.col("sid").is_in(many["sid"].unique().implode())).select("sid", "t")
    nxt = present.with_columns(pl.col("t") - step_ms, pl.lit(1, pl.Int8).alias("_next"))
    prv = present.with_columns(pl.col("t") + step_ms, pl.lit(1, pl.Int8).alias("_prev"))
    ranked = (
        many.join(weights, on=["sid", "t"], how="left")
        .with_columns(pl.col("weight").fill_null(1.0))
        .join(nxt, on=["sid", "t"], how="left")
        .join(prv, on=["sid", "t"], how="left")
        .with_columns((pl.col("_next").fill_null(0) * 2 + 1 - pl.col("_prev").fill_null(0)).alias("_rank"))
    )
    top = pl.col("_rank") == pl.col("_rank").max()
    value = (
        pl.col("value").max()
        if how == "max"
        else (pl.col("value") * pl.col("weight")).sum() / pl.col("weight").sum()
    )
    combined = ranked.group_by("key").agg(
        pl.col("gpu_index").drop_nulls().first(),
        pl.col("job_id").filter(top).drop_nulls().unique().sort().str.join(",").alias("job_id"),
        value.alias("value"),
    )
    combined = combined.with_columns(pl.col("job_id").replace("", None))
    return pl.concat([frame.filter(~dup).select(cols), combined.select(cols)])


def duplicated(key: pl.Series, step_ms: int) -> pl.Series:
    """`key.is_duplicated()` of GPU-and-time keys. Answers put their points on the page's step grid: then
    counting them in a dense grid of GPUs x steps says it in one pass (a key off the grid, or a grid far
    larger than the keys, is left to the hash-based count)."""
    import numpy as np

    if key.len() < 2:
        return pl.Series(np.zeros(key.len(), dtype=bool))
    values = key.to_numpy()
    gid, t = values // _T_BITS, values % _T_BITS
    offset = t - t.min()
    steps = int(offset.max()) // step_ms + 1
    cells = (int(gid.max()) + 1) * steps
    if cells > 8 * len(values) + 1_000_000 or (offset % step_ms).any():
        return key.is_duplicated()
    cell = gid * steps + offset // step_ms
    return pl.Series(np.bincount(cell, minlength=cells)[cell] > 1)


def _aligned(series: pl.DataFrame, results: Mapping[str, pl.DataFrame], step_ms: int) -> pl.DataFrame | None:
    """The page's rows as `resolve` and the join in page_frame give them, without either, when every stream
    answered the same series at the same steps, in the same order, and no GPU has two series at one step
    (the usual page: the queries differ only in their metric); None otherwise."""
    frames = list(results.values())
    first = frames[0]
    if any(f.height != first.height for f in frames) or not all(
        f["sid"].equals(first["sid"]) and f["t"].equals(first["t"]) for f in frames[1:]
    ):
        return None
    sid = first["sid"]
    key = series["gid"].gather(sid).cast(pl.Int64) * _T_BITS + first["t"]
    if duplicated(key, step_ms).any():
        return None
    stream = next(iter(results))
    return pl.DataFrame({
        "key": key,
        f"_index_{stream}": series["gpu_index"].gather(sid),
        f"_job_{stream}": series["job_id"].gather(sid),
        **{name: frame["value"] for name, frame in results.items()},
    })


def page_frame(
    cluster: str,
    parser: PageParser,
    results: Mapping[str, pl.DataFrame],
    weights: pl.DataFrame,
    step_ms: int,
    mem_aggregation: str,
) -> pl.DataFrame:
    """The gpu_samples rows of one page: the three metrics joined on the GPU and time."""
    import numpy as np

    series = parser.series_frame()
    merged = _aligned(series, results, step_ms)
    if merged is None:
        for stream, frame in results.items():
            how = mem_aggregation if stream == "mem_used_mib" else "avg"
            one = resolve(frame, series, weights, step_ms, how).rename(
                {"value": stream, "job_id": f"_job_{stream}", "gpu_index": f"_index_{stream}"}
            )
            merged = one if merged is None else merged.join(one, on="key", how="full", coalesce=True)
    assert merged is not None
    # Rows in (host, GPU, instance, time) order, sorted on integers: GPUs are numbered by their names.
    gpus = parser.gpu_frame().sort("host", "gpu_uuid", "gpu_instance")
    rank = np.empty(gpus.height, dtype=np.int64)
    rank[gpus["gid"].to_numpy()] = np.arange(gpus.height)
    gid = (merged["key"] // _T_BITS).to_numpy()
    merged = merged.with_columns(
        (pl.Series(rank[gid]) * _T_BITS + pl.col("key") % _T_BITS).alias("key")
    ).sort("key")
    order = merged["key"] // _T_BITS
    return merged.select(
        pl.lit(cluster, pl.String).alias("cluster"),
        gpus["host"].gather(order).alias("host"),
        gpus["gpu_uuid"].gather(order).alias("gpu_uuid"),
        gpus["gpu_instance"].gather(order).alias("gpu_instance"),
        pl.coalesce([c for c in merged.columns if c.startswith("_index_")]).alias("gpu_index"),
        pl.from_epoch(pl.col("key") % _T_BITS, time_unit="ms")
        .dt.replace_time_zone("UTC")
        .dt.cast_time_unit("us")
        .alias("time"),
        *(pl.col(s) for s in STREAMS),
        pl.coalesce([c for c in merged.columns if c.startswith("_job_")]).alias("job_id"),
    )


# -- the collector -----------------------------------------------------------


def plan_pages(start_ms: int, end_ms: int, step_ms: int, points: int) -> list[tuple[int, int]]:
    """Inclusive [first, last] evaluation times of each page; consecutive pages share no point."""
    pages = []
    first = start_ms
    while first <= end_ms:
        last = min(first + (points - 1) * step_ms, end_ms)
        pages.append((first, last))
        first = last + step_ms
    return pages


class PrometheusCollector:
    name: ClassVar[str] = NAME
    tables: ClassVar[tuple[str, ...]] = (TABLE,)

    def __init__(
        self,
        opts: Options,
        since_ms: int | None = None,
        until_ms: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.opts = opts
        self.since_ms = since_ms
        self.until_ms = until_ms
        # None: a progress bar only when stderr is a terminal.
        self.progress = progress
        # Windows of the last run that came back partial: first, last, the server's warnings.
        self.partial: list[tuple[int, int, list[str]]] = []

    def _floor(self, ms: int) -> int:
        return ms - ms % self.opts.step_ms

    def _ceil(self, ms: int) -> int:
        return -(-ms // self.opts.step_ms) * self.opts.step_ms

    def window(self, watermarks: Mapping[tuple[str, str], str]) -> tuple[int, int, dict[str, int | None]]:
        """First and last evaluation time of this run, and each stream's committed cursor."""
        step = self.opts.step_ms
        now = round(clock.time() * 1000)
        until = self._floor(self.until_ms if self.until_ms is not None else now - self.opts.safety_lag_ms)
        cursors: dict[str, int | None] = {}
        for stream in STREAMS:
            text = watermarks.get((self.opts.cluster, stream))
            cursors[stream] = parse_time(text, f"watermark {stream}") if text else None
        if self.since_ms is not None:
            start = self._ceil(self.since_ms)
        else:
            starts = [
                c + step if c is not None else until - self.opts.initial_window_ms + step
                for c in cursors.values()
            ]
            start = self._ceil(min(starts))
        return start, until, cursors

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        from tqdm import tqdm

        start, until, cursors = self.window(watermarks)
        pages = plan_pages(start, until, self.opts.step_ms, self.opts.page_points)
        if not pages:
            if self.since_ms is not None and self.until_ms is None:
                log.warning(
                    "prometheus: nothing to collect yet: --since %s lies inside the safety lag "
                    "(prometheus.safety_lag = %gs; samples are collected up to %s)",
                    iso(self.since_ms), self.opts.safety_lag_ms / 1000, iso(until),
                )
            else:
                log.info("prometheus: nothing to collect, already up to %s", iso(until))
            return
        source = PrometheusSource(self.opts)
        # Every query of a page is one task; `concurrency` threads bound the requests in flight.
        # Pages are queued only a few ahead of the one being loaded, which bounds memory, and are
        # handed over in page order: a fetch error surfaces after the pages before it are loaded.
        pool = ThreadPoolExecutor(max_workers=self.opts.concurrency, thread_name_prefix="prometheus-fetch")
        # One thread turns the next page's answers into rows while the caller loads this one (the
        # parsers and the load spend much of their time outside the interpreter lock): pages are
        # built in order, at most one ahead of the page being loaded.
        builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prometheus-build")
        ahead = -(-self.opts.concurrency // (len(self.opts.queries) + 1)) + 1
        queued: deque[tuple[dict[str, Future[bytes]], int, int]] = deque()
        built: deque[Future[tuple[pl.DataFrame, list[Reject], list[str]]]] = deque()
        submitted = 0
        self.partial.clear()
        held = False

        def build(futures: dict[str, Future[bytes]], first: int, last: int) -> tuple[
                pl.DataFrame, list[Reject], list[str]]:
            fetched = {stream: future.result() for stream, future in futures.items()}
            return self.build_page(pool, source, fetched, first, last)

        def top_up() -> None:
            nonlocal submitted
            while True:
                while submitted < len(pages) and len(queued) + len(built) < ahead + 1:
                    queued.append((self.submit_page(pool, source, *pages[submitted]), *pages[submitted]))
                    submitted += 1
                if not queued or len(built) >= 2:
                    return
                built.append(builder.submit(build, *queued.popleft()))

        try:
            if not self._check_series(source, start, until):
                return
            disable = None if self.progress is None else not self.progress
            bar = tqdm(total=len(pages), unit="page", disable=disable, file=sys.stderr)
            rows = 0
            began = clock.monotonic()
            with bar:
                for number, (first, last) in enumerate(pages, 1):
                    # Topped up before and after taking a page, so the workers stay busy and the next
                    # page is built while this one is loaded.
                    top_up()
                    frame, rejects, warnings = built.popleft().result()
                    top_up()
                    marks = []
                    if warnings:
                        # A partial answer (a store or ingester did not answer) still loads what came
                        # back, but no cursor moves past its window in this run, not even for later
                        # complete pages: the cursor is one point in time, so the next run re-collects
                        # from this window on, and the upsert fills in what was missing. A first run
                        # records where that is, or its re-run would start from a later initial window.
                        marks = [
                            Watermark(NAME, self.opts.cluster, stream, iso(first - self.opts.step_ms))
                            for stream in STREAMS
                            if cursors[stream] is None and not held
                        ]
                        held = True
                        self.partial.append((first, last, warnings))
                        log.warning(
                            "prometheus: %s answered [%s, %s] with warnings, so its rows may be incomplete: %s; "
                            "the watermark stays before this window, so the next run collects it again",
                            source.where,
                            iso(first),
                            iso(last),
                            "; ".join(warnings),
                        )
                    for stream in STREAMS if not held else ():
                        cursor = cursors[stream]
                        # A backfill moves a cursor only where it continues what is already collected.
                        if cursor is None or (first <= cursor + self.opts.step_ms and last > cursor):
                            marks.append(Watermark(NAME, self.opts.cluster, stream, iso(last)))
                            cursors[stream] = last
                    rows += frame.height
                    log.debug(
                        "prometheus: page %d/%d [%s, %s]: %d rows",
                        number,
                        len(pages),
                        iso(first),
                        iso(last),
                        rows,
                    )
                    yield Batch(source=NAME, frames={TABLE: frame}, rejects=rejects, watermarks=marks)
                    bar.update(1)
                    bar.set_postfix(
                        samples_s=f"{rows / max(clock.monotonic() - began, 1e-9):,.0f}", refresh=False
                    )
            if self.partial:
                log.warning(
                    "prometheus: %d of %d pages came back partial, from %s on; the next run collects "
                    "from there again",
                    len(self.partial),
                    len(pages),
                    iso(self.partial[0][0]),
                )
        finally:
            # The builder first: a page it is building waits on the fetch pool.
            builder.shutdown(wait=True, cancel_futures=True)
            pool.shutdown(wait=True, cancel_futures=True)
            source.close()

    def _check_series(self, source: PrometheusSource, start: int, until: int) -> bool:
        """Fail before any cursor moves when the busy metric has no series at all in the window:
        a wrong metric name or selector would otherwise commit an empty window as collected.
        False (said in one line) when the window ends before the metric's first sample: it
        cannot hold data, and the cursor stays where it is."""
        if not self.opts.known_metrics:
            return True
        matches = [f"{m}{{{self.opts.selector}}}" for m in self.opts.known_metrics]
        if source.series_count(matches, start - self.opts.step_ms, until) == 0:
            now = round(clock.time() * 1000)
            if until < now and source.series_count(matches, until, now) > 0:
                log.warning(
                    "prometheus: nothing to collect: the window [%s, %s] ends before the first scraped sample "
                    "of %s", iso(start), iso(until), " or ".join(matches),
                )
                return False
            raise SourceError(
                f"no series of {' or '.join(matches)} in Prometheus at {source.where} "
                f"over [{iso(start)}, {iso(until)}]; nothing was collected",
                "check prometheus.busy_metric and prometheus.selector against the server "
                '(e.g. count by (__name__)({__name__=~"DCGM.*"})), and that the window is within its retention',
            )
        return True

    def submit_page(
        self, pool: ThreadPoolExecutor, source: PrometheusSource, first: int, last: int
    ) -> dict[str, Future[bytes]]:
        """The first requests of one page, queued on the pool; each answer is kept unparsed, so
        the workers spend their time waiting on the server and the next request leaves at once."""
        staged = self.opts.staged
        queries = dict(self.opts.queries) if staged else {**self.opts.queries, "weight": self.opts.weight_query}
        futures = {
            stream: pool.submit(source.query_range, stream, query, first, last)
            for stream, query in queries.items()
        }
        if staged is not None and staged.fallback_metric:
            match = [f"{staged.fallback_metric}{{{self.opts.selector}}}"]
            futures[_FALLBACK_SERIES] = pool.submit(source.series, match, first - self.opts.step_ms, last)
        return futures

    def build_page(
        self,
        pool: ThreadPoolExecutor,
        source: PrometheusSource,
        fetched: Mapping[str, bytes],
        first: int,
        last: int,
    ) -> tuple[pl.DataFrame, list[Reject], list[str]]:
        """The page's rows from its first answers, asking for the fallback values and the
        weights first when the page needs them (see `Staged`)."""
        parser = PageParser(f"[{iso(first)}, {iso(last)}]")
        answers = {stream: range_result(body) for stream, body in fetched.items() if stream != _FALLBACK_SERIES}
        warnings = [w for answer in answers.values() for w in answer.warnings]
        staged = self.opts.staged

        def ask(stream: str, query: str) -> RangeAnswer:
            # Through the pool, so that no more than `concurrency` requests are in flight.
            answer = range_result(pool.submit(source.query_range, stream, query, first, last).result())
            warnings.extend(answer.warnings)
            return answer

        fill = None
        if staged is not None and _FALLBACK_SERIES in fetched:
            listed = orjson.loads(fetched[_FALLBACK_SERIES])
            warnings.extend(str(w) for w in listed.get("warnings") or ())
            lacking = self.lacking_busy(answers["busy"], listed["data"], first, last)
            if lacking:
                fill = ask("busy fallback", staged.fill_query(gpu_matchers(lacking)))
        results = {}
        for stream in self.opts.queries:
            results[stream] = parser.points(answers[stream], stream)
            if stream == "busy" and fill is not None and staged is not None:
                scaled = parser.points(fill, stream).with_columns(pl.col("value") * staged.fallback_scale)
                results[stream] = pl.concat([results[stream], scaled])
        if staged is None:
            weights = parser.points(answers["weight"], "weight")
        else:
            shared = self.shared_series(parser, results)
            weights = pl.DataFrame(schema={"sid": pl.Int32, "t": pl.Int64, "value": pl.Float64})
            if shared:
                query = staged.weight_query(gpu_matchers(parser.labels[sid] for sid in shared))
                weights = parser.points(ask("weight", query), "weight")
        frame = page_frame(
            self.opts.cluster,
            parser,
            results,
            weights.rename({"value": "weight"}),
            self.opts.step_ms,
            self.opts.mem_aggregation,
        )
        return frame, list(parser.rejects.values()), list(dict.fromkeys(warnings))

    def lacking_busy(
        self, busy: RangeAnswer, listed: Sequence[Mapping[str, str]], first: int, last: int
    ) -> list[dict[str, str]]:
        """The listed fallback series (without their name) whose label set lacks a busy value at
        some step of the page: the only ones `or` could take a fallback value from."""
        steps = (last - first) // self.opts.step_ms + 1
        counts = zip(busy.metrics, busy.counts.tolist(), strict=True)
        complete = {series_key(labels) for labels, n in counts if n == steps}
        lacking = []
        for named in listed:
            labels = {k: v for k, v in named.items() if k != "__name__"}
            if series_key(labels) not in complete:
                lacking.append(labels)
        return lacking

    def shared_series(self, parser: PageParser, results: Mapping[str, pl.DataFrame]) -> list[int]:
        """The series that share a GPU and step with another in a stream `resolve` averages: the
        only ones whose raw sample counts (weights) it reads."""
        gid = parser.series_frame()["gid"].cast(pl.Int64)
        shared = [pl.Series("sid", [], pl.Int32)]
        for stream, frame in results.items():
            if stream == "mem_used_mib" and self.opts.mem_aggregation == "max":
                continue
            key = gid.gather(frame["sid"]) * _T_BITS + frame["t"]
            shared.append(frame["sid"].filter(duplicated(key, self.opts.step_ms)))
        return sorted(pl.concat(shared).unique().to_list())


# -- CLI ---------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", help=f"backfill from this time ({TIME_HELP}) instead of the watermark"
    )
    parser.add_argument("--until", help="collect up to this time, written as --since (default: now minus "
                        "prometheus.safety_lag)")
    parser.add_argument("--url", type=text_argument(http_url), help="Prometheus base URL (overrides prometheus.url)")
    parser.add_argument("--step", type=text_argument(duration_text(1, 86_400)),
                        help="collection step, e.g. 1m (overrides prometheus.step)")
    parser.add_argument(
        "--page-points", type=number_argument(int, 1, 11_000),
        help="points per series per request (overrides prometheus.page_points)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


_PINNED_CLUSTER = re.compile(r'(?:^|,)\s*cluster\s*=\s*"((?:[^"\\]|\\.)+)"\s*(?:,|$)')


def pinned_cluster(selector: str) -> str:
    """The cluster that `prometheus.selector` pins with an equality matcher (`cluster="a"`)."""
    found = _PINNED_CLUSTER.search(selector)
    if not found:
        raise ConfigError(
            "prometheus: cluster.name is not set and prometheus.selector pins no cluster label",
            'set cluster.name, or pin the cluster in the selector: cluster="<name>"',
        )
    return found.group(1).replace('\\"', '"')


def build(args: argparse.Namespace, config: Config) -> PrometheusCollector:
    given = {key: getattr(args, key) for key in ("url", "step", "page_points") if getattr(args, key, None) is not None}
    settings = replace(config.of(PrometheusSettings), **given)
    opts = options_from(settings, config.of(ClusterSettings).name or pinned_cluster(settings.selector))
    since = parse_time(args.since, "--since") if args.since else None
    until = parse_time(args.until, "--until") if args.until else None
    if since is not None and until is not None and since > until:
        raise ConfigError(f"--since {args.since} is after --until {args.until}", "swap them")
    return PrometheusCollector(opts, since, until, progress=False if args.no_progress else None)
