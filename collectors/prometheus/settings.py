"""The [prometheus] section: what every module of the collector reads, at the package's foot (the source in
__init__.py builds on it, as does queries.py's options_from), so the package's modules import one way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from preemptlens.config import Secret, duration_text, http_url, section, setting, size_text

NAME = "prometheus"
# Longest request URL sent as GET under method "auto". Proxies and gateways in front of
# multi-tenant backends commonly cap the request line at 4-8 KiB (HTTP 414 beyond).
GET_MAX_URL = 2048


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
        "whole into memory (lower prometheus.page_points or narrow the selector). Reading an answer takes about "
        "twice its size in memory, and up to prometheus.concurrency answers are read at once.",
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
