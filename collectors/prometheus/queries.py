"""The collector's options from its settings, and the PromQL it sends (see `Staged`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson

from preemptlens.config import Secret, parse_size
from preemptlens.errors import ConfigError
from preemptlens.times import parse_duration_ms

if TYPE_CHECKING:
    from preemptlens.collectors.prometheus.settings import PrometheusSettings

MAX_POINTS = 11_000  # Prometheus refuses more points per series in one range query
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


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
