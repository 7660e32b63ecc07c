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
so that no boundary point is read twice. Each page becomes one batch holding
the three metrics of its window in one gpu_samples frame, plus the watermarks
(one per cluster and metric) of that page, so a crash loses at most the page
in flight and a re-run resumes after the last committed page.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time as clock
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, NoReturn
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np
import orjson
import polars as pl
import requests
from prometheus_api_client import PrometheusConnect
from requests.adapters import Retry
from tqdm import tqdm
from urllib3.exceptions import ReadTimeoutError

from collectors.base import Batch, Reject, Watermark
from preemptlens.config import Config, Secret, Section, Setting
from preemptlens.errors import ConfigError, SourceError, TransientSourceError

log = logging.getLogger(__name__)

NAME = "prometheus"
TABLE = "gpu_samples"
MAX_POINTS = 11_000  # Prometheus refuses more points per series in one range query
# Watermark streams, one per contract column a metric fills.
STREAMS = ("busy", "mem_used_mib", "power_w")

SETTINGS = Section(
    NAME,
    "Collect DCGM GPU metrics from anything that serves the Prometheus HTTP API.",
    (
        Setting(
            "url",
            "http://127.0.0.1:9090",
            "Base URL of the Prometheus HTTP API (Prometheus, Thanos, Mimir...).",
        ),
        Setting("bearer_token", None, "Bearer token sent as `Authorization: Bearer ...`.", secret=True),
        Setting("username", None, "User name for HTTP basic auth."),
        Setting("password", None, "Password for HTTP basic auth.", secret=True),
        Setting(
            "headers",
            {},
            "Extra HTTP headers, e.g. X-Scope-OrgID for Mimir (not secret; use bearer_token or password for those).",
            kind=dict,
        ),
        Setting("verify_tls", True, "Verify the server's TLS certificate.", kind=bool),
        Setting("ca_file", "", "CA bundle that signs the server's certificate (empty: the system CAs)."),
        Setting("timeout_s", 120.0, "Seconds to wait for one HTTP response.", kind=float),
        Setting(
            "retries", 4, "Retries of a request that failed transiently (connection, 429, 502-504).", kind=int
        ),
        Setting(
            "backoff_s", 1.0, "Backoff factor between retries: waits grow 1x, 2x, 4x... this.", kind=float
        ),
        Setting("step", "1m", "Collection step: one gpu_samples row per GPU and step (Prometheus duration)."),
        Setting(
            "safety_lag",
            "5m",
            "An incremental run collects up to now minus this, so late samples land first.",
        ),
        Setting(
            "initial_window", "1d", "How far back the first run collects when there is no watermark yet."
        ),
        Setting(
            "page_points", 1440, "Points per series per range query (at most 11000); bounds memory.", kind=int
        ),
        Setting("selector", "", 'Label matchers added to every metric, e.g. cluster="a100",job="dcgm".'),
        Setting("busy_metric", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Busy signal, a 0-1 ratio."),
        Setting(
            "busy_fallback_metric",
            "DCGM_FI_DEV_GPU_UTIL",
            "Busy signal where busy_metric is absent (consumer GPUs); empty: no fallback.",
        ),
        Setting("busy_fallback_scale", 0.01, "Factor from busy_fallback_metric to a 0-1 ratio.", kind=float),
        Setting("mem_metric", "DCGM_FI_DEV_FB_USED", "GPU memory used, in MiB."),
        Setting("mem_aggregation", "max", "How memory is summarised over a step.", choices=("max", "avg")),
        Setting("power_metric", "DCGM_FI_DEV_POWER_USAGE", "Power draw, in W."),
        Setting(
            "busy_query", "", "PromQL replacing the built busy query; `$window` stands for the step window."
        ),
        Setting("mem_query", "", "PromQL replacing the built memory query; `$window` as above."),
        Setting("power_query", "", "PromQL replacing the built power query; `$window` as above."),
    ),
)

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
    "y": 31_536_000_000,
}


def parse_duration(text: str, setting: str) -> int:
    """A Prometheus duration (`90s`, `1h30m`) in milliseconds."""
    text = text.strip()
    if not text or _DURATION.sub("", text) != "":
        raise ConfigError(
            f"{setting}: {text!r} is not a duration", "write it as Prometheus does: 30s, 1m, 6h, 7d"
        )
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _DURATION.findall(text))


def parse_time(text: str, option: str) -> int:
    """ISO 8601 (naive means UTC) or epoch seconds, in epoch milliseconds."""
    try:
        return round(float(text) * 1000)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{option}: {text!r} is not a time", "give ISO 8601 (2026-11-02T10:00Z) or epoch seconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)


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
    index = int(index_text) if index_text and index_text.isdigit() else None
    return GpuSeries(host, uuid, labels.get("GPU_I_ID", ""), index, job_of(labels))


# -- options -----------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    url: str
    cluster: str
    step_ms: int
    safety_lag_ms: int
    initial_window_ms: int
    page_points: int
    queries: dict[str, str]  # stream -> PromQL
    weight_query: str
    known_metrics: tuple[str, ...]  # metric names the built busy query reads
    selector: str = ""
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 1.0
    headers: dict[str, str] = field(default_factory=dict)
    bearer_token: Secret | None = None
    username: str | None = None
    password: Secret | None = None
    verify_tls: bool = True
    ca_file: str = ""
    mem_aggregation: str = "max"


def _metric(values: Mapping[str, Any], key: str) -> str:
    name = str(values[key])
    if not _METRIC_NAME.match(name):
        raise ConfigError(
            f"prometheus.{key}: {name!r} is not a metric name", "use the exporter's metric name"
        )
    return name


def options_from(values: Mapping[str, Any], cluster: str) -> Options:
    step_ms = parse_duration(str(values["step"]), "prometheus.step")
    if step_ms < 1000:
        raise ConfigError(
            f"prometheus.step: {values['step']!r} is under a second", "use 1m (the default) or 30s"
        )
    points = int(values["page_points"])
    if not 1 <= points <= MAX_POINTS:
        raise ConfigError(
            f"prometheus.page_points: {points} is not between 1 and {MAX_POINTS}",
            f"Prometheus refuses range queries of more than {MAX_POINTS} points per series",
        )
    selector = str(values["selector"]).strip()
    if "{" in selector or "}" in selector:
        raise ConfigError(
            f"prometheus.selector: {selector!r} has braces", 'give only the matchers: cluster="a100"'
        )
    window = f"{step_ms - 1}ms"

    def sel(metric: str) -> str:
        return f"{metric}{{{selector}}}[{window}]"

    busy, fallback = _metric(values, "busy_metric"), str(values["busy_fallback_metric"] or "")
    if fallback:
        fallback = _metric(values, "busy_fallback_metric")
    mem, power = _metric(values, "mem_metric"), _metric(values, "power_metric")
    scale = float(values["busy_fallback_scale"])
    busy_q = f"avg_over_time({sel(busy)})"
    weight_q = f"count_over_time({sel(busy)})"
    if fallback:
        # Per series and step: the profiling ratio where it exists, the scaled utilisation elsewhere.
        busy_q += f" or (avg_over_time({sel(fallback)}) * {scale!r})"
        weight_q += f" or count_over_time({sel(fallback)})"
    built = {
        "busy": busy_q,
        "mem_used_mib": f"{values['mem_aggregation']}_over_time({sel(mem)})",
        "power_w": f"avg_over_time({sel(power)})",
    }
    custom = {"busy": "busy_query", "mem_used_mib": "mem_query", "power_w": "power_query"}
    queries = {
        stream: str(values[key]).replace("$window", window) if values[key] else built[stream]
        for stream, key in custom.items()
    }
    headers = {str(k): str(v) for k, v in dict(values["headers"]).items()}
    return Options(
        url=str(values["url"]).rstrip("/"),
        cluster=cluster,
        step_ms=step_ms,
        safety_lag_ms=parse_duration(str(values["safety_lag"]), "prometheus.safety_lag"),
        initial_window_ms=parse_duration(str(values["initial_window"]), "prometheus.initial_window"),
        page_points=points,
        queries=queries,
        weight_query=weight_q,
        known_metrics=tuple(m for m in (busy, fallback) if m) if not values["busy_query"] else (),
        selector=selector,
        timeout_s=float(values["timeout_s"]),
        retries=int(values["retries"]),
        backoff_s=float(values["backoff_s"]),
        headers=headers,
        bearer_token=values["bearer_token"],
        username=values["username"],
        password=values["password"],
        verify_tls=bool(values["verify_tls"]),
        ca_file=str(values["ca_file"] or ""),
        mem_aggregation=str(values["mem_aggregation"]),
    )


# -- HTTP --------------------------------------------------------------------


class PrometheusSource:
    """Range queries over one HTTP session configured by prometheus-api-client.

    PrometheusConnect sets up the session (auth, TLS, headers, retry with
    backoff); range queries are sent on that session directly so the body is
    parsed with orjson and errors are reported without the response body.
    """

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.where = redact_url(opts.url)
        session = requests.Session()
        session.verify = opts.ca_file or opts.verify_tls
        headers = dict(opts.headers)
        if opts.bearer_token is not None:
            headers["Authorization"] = f"Bearer {opts.bearer_token.reveal()}"
        auth = None
        parts = urlsplit(opts.url)
        if opts.username:
            auth = (opts.username, opts.password.reveal() if opts.password else "")
        elif parts.username:
            auth = (unquote(parts.username), unquote(parts.password or ""))
        retry = Retry(
            total=opts.retries,
            connect=opts.retries,
            read=1,
            status=opts.retries,
            backoff_factor=opts.backoff_s,
            status_forcelist=(429, 502, 503, 504),
            allowed_methods=frozenset({"GET", "POST"}),
            raise_on_status=False,
        )
        self.client = PrometheusConnect(
            url=self.where,
            headers=headers,
            retry=retry,
            auth=auth,
            session=session,
            timeout=opts.timeout_s,
            method="POST",
        )
        self.session = session

    def close(self) -> None:
        self.client.close()

    def _post(self, path: str, data: Sequence[tuple[str, str]], what: str) -> Any:
        return orjson.loads(self._post_raw(path, data, what))["data"]

    def _post_raw(self, path: str, data: Sequence[tuple[str, str]], what: str) -> bytes:
        """The body of a successful answer, unparsed."""
        try:
            response = self.session.post(
                f"{self.client.url}{path}",
                data=data,
                headers=self.client.headers,
                auth=self.client.auth,
                timeout=self.opts.timeout_s,
            )
        except (requests.ConnectionError, requests.Timeout) as exc:
            # Once read retries run out, requests reports a read timeout as a ConnectionError.
            reason = getattr(exc.args[0], "reason", None) if exc.args else None
            if isinstance(exc, requests.ReadTimeout) or isinstance(reason, ReadTimeoutError):
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
        if response.status_code == 200:
            return response.content
        self._fail(response, what)

    def _fail(self, response: requests.Response, what: str) -> NoReturn:
        status = response.status_code
        try:
            detail = orjson.loads(response.content)
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
            raise SourceError(said, "check prometheus.bearer_token or prometheus.username/password")
        if status in (429, 502, 503, 504):
            raise TransientSourceError(
                f"{said}, still after {self.opts.retries} retries",
                "the server is overloaded or restarting: run again later; it resumes after the last committed page",
            )
        raise SourceError(said, "check prometheus.url points at the Prometheus HTTP API")

    def query_range(self, stream: str, query: str, start_ms: int, end_ms: int) -> bytes:
        """The answer's body, unparsed: `range_result` reads it."""
        what = f"the {stream} query {query!r} over [{iso(start_ms)}, {iso(end_ms)}]"
        return self._post_raw(
            "/api/v1/query_range",
            [
                ("query", query),
                ("start", f"{start_ms / 1000:.3f}"),
                ("end", f"{end_ms / 1000:.3f}"),
                ("step", f"{self.opts.step_ms / 1000:g}"),
            ],
            what,
        )

    def series_count(self, metrics: Sequence[str], start_ms: int, end_ms: int) -> int:
        """How many series of `metrics` exist in the window (index only, no samples read)."""
        data = self._post(
            "/api/v1/series",
            [
                *(("match[]", m) for m in metrics),
                ("start", f"{start_ms / 1000:.3f}"),
                ("end", f"{end_ms / 1000:.3f}"),
            ],
            f"the series lookup of {', '.join(metrics)} over [{iso(start_ms)}, {iso(end_ms)}]",
        )
        return len(data)


def range_result(body: bytes) -> list[dict[str, Any]]:
    """The series of a query_range answer."""
    return list(orjson.loads(body)["data"]["result"])


# -- frames ------------------------------------------------------------------


class PageParser:
    """Turns the query results of one page into compact frames.

    Series (by their full label set) and GPUs (host, UUID, MIG instance) get
    small integer ids, so joins and groupings over hundreds of thousands of
    points run on integers; the strings are attached once per GPU at the end.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.series: dict[str, int] = {}
        self.series_rows: list[tuple[int, int, int | None, str | None]] = []  # sid, gid, gpu index, job
        self.gpus: dict[tuple[str, str, str], int] = {}
        self.rejects: dict[str, Reject] = {}

    def _sid(self, labels: dict[str, str], stream: str) -> int | None:
        key = orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()
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
        self.series_rows.append((sid, gid, gpu.gpu_index, gpu.job_id))
        return sid

    def points(self, result: list[dict[str, Any]], stream: str) -> pl.DataFrame:
        """One row per (series, step) of a query_range result: sid, t (epoch ms), value."""
        times: list[float] = []
        values: list[str] = []
        sids: list[int] = []
        lengths: list[int] = []
        for series in result:
            sid = self._sid(series["metric"], stream)
            points = series["values"]
            if sid is None or not points:
                continue
            ts, vs = zip(*points, strict=True)
            times.extend(ts)
            values.extend(vs)
            sids.append(sid)
            lengths.append(len(points))
        return pl.DataFrame(
            {
                "sid": np.repeat(np.asarray(sids, dtype=np.int32), lengths),
                "t": (np.asarray(times, dtype=np.float64) * 1000).round().astype(np.int64),
                "value": pl.Series(values, dtype=pl.String).cast(pl.Float64),
            },
            schema={"sid": pl.Int32, "t": pl.Int64, "value": pl.Float64},
        )

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


_KEY = ["gid", "t"]


def resolve(frame: pl.DataFrame, series: pl.DataFrame, step_ms: int, how: str) -> pl.DataFrame:
    """One value and job per GPU and step where several series describe the same GPU.

    That happens at a job boundary (the old job's series and the new one's
    both have samples in the step) and with shared GPUs (one series per job).
    Values combine as the step's true aggregate (`weight` = raw samples per
    series and step). The job is the one that holds the GPU at the step's end:
    the series that goes on in the next step and did not exist in the previous
    one ranks first; jobs that tie are all named, sorted, comma-separated.
    """
    frame = frame.join(series, on="sid", how="left")
    dup = pl.len().over(_KEY) > 1
    cols = ["gid", "t", "gpu_index", "job_id", "value"]
    many = frame.filter(dup)
    if many.height == 0:
        return frame.select(cols)
    # Presence in the neighbouring steps is read from the whole page, not just the duplicated rows.
    present = frame.select("sid", "t")
    nxt = present.with_columns(pl.col("t") - step_ms, pl.lit(1, pl.Int8).alias("_next"))
    prv = present.with_columns(pl.col("t") + step_ms, pl.lit(1, pl.Int8).alias("_prev"))
    ranked = (
        many.join(nxt, on=["sid", "t"], how="left")
        .join(prv, on=["sid", "t"], how="left")
        .with_columns((pl.col("_next").fill_null(0) * 2 + 1 - pl.col("_prev").fill_null(0)).alias("_rank"))
    )
    top = pl.col("_rank") == pl.col("_rank").max()
    value = (
        pl.col("value").max()
        if how == "max"
        else (pl.col("value") * pl.col("weight")).sum() / pl.col("weight").sum()
    )
    combined = ranked.group_by(_KEY).agg(
        pl.col("gpu_index").drop_nulls().first(),
        pl.col("job_id").filter(top).drop_nulls().unique().sort().str.join(",").alias("job_id"),
        value.alias("value"),
    )
    combined = combined.with_columns(pl.col("job_id").replace("", None))
    return pl.concat([frame.filter(~dup).select(cols), combined.select(cols)])


def page_frame(
    cluster: str,
    parser: PageParser,
    results: Mapping[str, pl.DataFrame],
    weights: pl.DataFrame,
    step_ms: int,
    mem_aggregation: str,
) -> pl.DataFrame:
    """The gpu_samples rows of one page: the three metrics joined on the GPU and time."""
    series = parser.series_frame()
    merged: pl.DataFrame | None = None
    for stream, frame in results.items():
        weighted = frame.join(weights, on=["sid", "t"], how="left").with_columns(
            pl.col("weight").fill_null(1.0)
        )
        how = mem_aggregation if stream == "mem_used_mib" else "avg"
        one = resolve(weighted, series, step_ms, how).rename(
            {"value": stream, "job_id": f"_job_{stream}", "gpu_index": f"_index_{stream}"}
        )
        merged = one if merged is None else merged.join(one, on=_KEY, how="full", coalesce=True)
    assert merged is not None
    out = merged.join(parser.gpu_frame(), on="gid", how="left").select(
        pl.lit(cluster, pl.String).alias("cluster"),
        "host",
        "gpu_uuid",
        "gpu_instance",
        pl.coalesce([f"_index_{s}" for s in results]).alias("gpu_index"),
        pl.from_epoch("t", time_unit="ms").dt.replace_time_zone("UTC").dt.cast_time_unit("us").alias("time"),
        *(pl.col(s) for s in STREAMS),
        pl.coalesce([f"_job_{s}" for s in results]).alias("job_id"),
    )
    return out.sort("host", "gpu_uuid", "gpu_instance", "time")


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
        start, until, cursors = self.window(watermarks)
        pages = plan_pages(start, until, self.opts.step_ms, self.opts.page_points)
        if not pages:
            log.info("prometheus: nothing to collect, already up to %s", iso(until))
            return
        source = PrometheusSource(self.opts)
        # The next page is fetched while this one is turned into rows and loaded: Prometheus
        # answers from its own process, so its time and ours overlap. One page ahead at most
        # bounds memory; a fetch error surfaces in page order, after the pages before it.
        prefetch = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prometheus-prefetch")
        try:
            self._check_series(source, start, until)
            disable = None if self.progress is None else not self.progress
            bar = tqdm(total=len(pages), unit="page", disable=disable, file=sys.stderr)
            rows = 0
            began = clock.monotonic()
            with bar:
                pending = prefetch.submit(self.fetch_page, source, *pages[0])
                for number, (first, last) in enumerate(pages, 1):
                    fetched = pending.result()
                    if number < len(pages):
                        pending = prefetch.submit(self.fetch_page, source, *pages[number])
                    frame, rejects = self.build_page(fetched, first, last)
                    marks = []
                    for stream in STREAMS:
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
        finally:
            prefetch.shutdown(wait=True, cancel_futures=True)
            source.close()

    def _check_series(self, source: PrometheusSource, start: int, until: int) -> None:
        """Fail before any cursor moves when the busy metric has no series at all in the window:
        a wrong metric name or selector would otherwise commit an empty window as collected."""
        if not self.opts.known_metrics:
            return
        matches = [f"{m}{{{self.opts.selector}}}" for m in self.opts.known_metrics]
        if source.series_count(matches, start - self.opts.step_ms, until) == 0:
            raise SourceError(
                f"no series of {' or '.join(matches)} in Prometheus at {source.where} "
                f"over [{iso(start)}, {iso(until)}]; nothing was collected",
                "check prometheus.busy_metric and prometheus.selector against the server "
                '(e.g. count by (__name__)({__name__=~"DCGM.*"})), and that the window is within its retention',
            )

    def fetch_page(self, source: PrometheusSource, first: int, last: int) -> dict[str, bytes]:
        """The answers of one page, unparsed: the prefetch thread then spends its time waiting
        on Prometheus only, and the next request leaves as soon as an answer is in."""
        fetched = {
            stream: source.query_range(stream, query, first, last) for stream, query in self.opts.queries.items()
        }
        fetched["weight"] = source.query_range("weight", self.opts.weight_query, first, last)
        return fetched

    def build_page(
        self, fetched: Mapping[str, bytes], first: int, last: int
    ) -> tuple[pl.DataFrame, list[Reject]]:
        parser = PageParser(f"[{iso(first)}, {iso(last)}]")
        results = {stream: parser.points(range_result(fetched[stream]), stream) for stream in self.opts.queries}
        weights = parser.points(range_result(fetched["weight"]), "weight").rename({"value": "weight"})
        frame = page_frame(
            self.opts.cluster, parser, results, weights, self.opts.step_ms, self.opts.mem_aggregation
        )
        return frame, list(parser.rejects.values())


# -- CLI ---------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", help="backfill from this time (ISO 8601 or epoch seconds) instead of the watermark"
    )
    parser.add_argument("--until", help="collect up to this time (default: now minus prometheus.safety_lag)")
    parser.add_argument("--url", help="Prometheus base URL (overrides prometheus.url)")
    parser.add_argument("--step", help="collection step, e.g. 1m (overrides prometheus.step)")
    parser.add_argument(
        "--page-points", type=int, help="points per series per request (overrides prometheus.page_points)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def build(args: argparse.Namespace, config: Config) -> PrometheusCollector:
    values = config.section(NAME)
    for option, key in (("url", "url"), ("step", "step"), ("page_points", "page_points")):
        if getattr(args, option, None) is not None:
            values[key] = getattr(args, option)
    opts = options_from(values, str(config.get("cluster.name")))
    since = parse_time(args.since, "--since") if args.since else None
    until = parse_time(args.until, "--until") if args.until else None
    if since is not None and until is not None and since > until:
        raise ConfigError(f"--since {args.since} is after --until {args.until}", "swap them")
    return PrometheusCollector(opts, since, until, progress=False if args.no_progress else None)
