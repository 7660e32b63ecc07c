"""The collector against a multi-tenant backend: the real Prometheus behind a tenant gateway.

The gateway (tests/prometheus/proxy.py) adds what Mimir, Cortex, Thanos and
VictoriaMetrics add to the Prometheus API: a required tenant header, a bearer
token, partial answers with warnings, 429 with Retry-After and 503. What the
collector stores through it must equal the direct collection.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preemptlens.collectors.prometheus import (
    GET_MAX_URL,
    PrometheusCollector,
    add_arguments,
    build,
    iso,
    plan_pages,
)
from preemptlens.config import Secret, load_config
from preemptlens.errors import ConfigError, SourceError
from preemptlens.warehouse import Warehouse
from tests.prometheus.conftest import History, PrometheusServer
from tests.prometheus.groundtruth import CLUSTER
from tests.prometheus.helpers import collector, ms, run, table, watermarks
from tests.prometheus.proxy import PARTIAL_WARNING, TenantGateway

TOKEN = "gw-t0ken-5ecret-a1b2c3"
TENANT = "team-a"
STEP = 60_000
PAGE = 97
# The built power query with a selector that matches what the built one does, padded past
# the length a URL may have: it must go as POST, the short ones as GET.
PADDED = "|".join(["dcgm-exporter", *(f"unused-scrape-job-{i:03d}" for i in range(120))])
LONG_POWER = f'avg_over_time(DCGM_FI_DEV_POWER_USAGE{{job=~"{PADDED}"}}[$window])'


@pytest.fixture
def gateway(prometheus: PrometheusServer) -> Iterator[TenantGateway]:
    gw = TenantGateway(prometheus.url, tenant=TENANT, token=TOKEN).start()
    yield gw
    gw.stop()


def utc(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC)


def through(
    gateway: TenantGateway, since: datetime | None, until: datetime | None, **settings: Any
) -> PrometheusCollector:
    """A collector reaching the gateway as its tenant with its token, as every test here does; `settings` add
    to those or replace them."""
    return collector(gateway.url, since, until, **{"tenant": TENANT, "bearer_token": Secret(TOKEN), **settings})


def everything_stored(path: Path) -> str:
    """Every value of every table of the warehouse, as text."""
    with Warehouse(path) as wh:
        names = wh.query("SELECT table_name FROM duckdb_tables()")["table_name"].to_list()
        return "\n".join(str(wh.query(f'SELECT * FROM "{name}"').rows()) for name in names)


def test_through_the_gateway_equals_the_direct_collection(
    history: History,
    reference: Path,
    gateway: TenantGateway,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway.throttle_every, gateway.unavailable_every, gateway.delay_s = 9, 13, 0.02
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "w.duckdb"
    col = through(
        gateway,
        history.first,
        history.last,
        page_points=PAGE,
        concurrency=3,
        retries=4,
        backoff_s=0.01,
        power_query=LONG_POWER,
    )
    run(path, col)
    assert table(path).equals(table(reference))
    assert set(watermarks(path).values()) == {iso(ms(history.last))}
    assert col.partial == []

    seen = gateway.seen
    assert all(s.headers.get("x-scope-orgid") == TENANT for s in seen)
    assert {s.status for s in seen} == {200, 429, 503}, "the gateway's faults were not all exercised"
    # Long queries went as POST, short ones as GET.
    ranges = [s for s in seen if s.path.endswith("/query_range")]
    long_ones = [s for s in ranges if "unused-scrape-job" in (s.param("query") or "")]
    short = [s for s in ranges if s not in long_ones]
    assert long_ones and short and {s.method for s in long_ones} == {"POST"} and {s.method for s in short} == {"GET"}
    assert all(len(f"{gateway.url}{s.path}?{s.param('query')}") < GET_MAX_URL for s in short)
    # A 429 is retried only after the Retry-After the gateway asked for (backoff alone is 0.01 s).
    for refused in (s for s in seen if s.status == 429):
        again = next(s for s in seen if s.at > refused.at and s.params == refused.params and s.path == refused.path)
        assert again.at - refused.at >= gateway.retry_after_s - 0.05
    assert "HTTP 429, retrying after Retry-After 1 s" in caplog.text
    # Never more than the limit in flight, and more than one.
    assert 1 < gateway.max_in_flight <= 3
    assert TOKEN not in caplog.text and TOKEN not in everything_stored(path)


def test_concurrency_one_sends_one_request_at_a_time(
    history: History, reference: Path, gateway: TenantGateway, tmp_path: Path
) -> None:
    gateway.delay_s = 0.01
    path = tmp_path / "w.duckdb"
    col = through(gateway, history.first, history.last, page_points=PAGE, concurrency=1, method="post")
    run(path, col)
    assert table(path).equals(table(reference))
    assert gateway.max_in_flight == 1 and {s.method for s in gateway.seen} == {"POST"}


@pytest.mark.parametrize(("tenant", "status"), [("", 401), ("team-b", 403)])
def test_wrong_or_missing_tenant_fails_with_a_hint_and_stores_nothing(
    history: History,
    gateway: TenantGateway,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    tenant: str,
    status: int,
) -> None:
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "w.duckdb"
    col = through(gateway, history.first, history.last, tenant=tenant)
    with pytest.raises(SourceError) as err:
        run(path, col)
    text = str(err.value)
    assert f"HTTP {status}" in text and "prometheus.tenant" in text and "X-Scope-OrgID" in text
    assert TOKEN not in text and TOKEN not in caplog.text
    assert watermarks(path) == {} and table(path).height == 0


@pytest.mark.parametrize("partial_page", [0, 3])
def test_partial_answer_is_loaded_marked_and_collected_again(
    history: History,
    reference: Path,
    gateway: TenantGateway,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    partial_page: int,
) -> None:
    pages = plan_pages(ms(history.first), ms(history.last), STEP, PAGE)
    first, last = pages[partial_page]
    gateway.warn_starts_ms = {first}
    path = tmp_path / "w.duckdb"
    col = through(gateway, history.first, history.last, page_points=PAGE)
    run(path, col)

    # Surfaced: in the log with its window, and on the collector.
    assert col.partial == [(first, last, [PARTIAL_WARNING])]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and PARTIAL_WARNING in r.getMessage()]
    assert len(warned) == 1 and iso(first) in warned[0].getMessage() and iso(last) in warned[0].getMessage()
    # What came back is stored, later pages too, but the window lacks the series the store held.
    got, want = table(path), table(reference)
    assert got.height < want.height and got["time"].max() == want["time"].max()
    window = pl.col("time").is_between(utc(first), utc(last))
    assert 0 < got.filter(window).height < want.filter(window).height
    # Marked: the cursor stays just before the partial window, even on a first run.
    assert set(watermarks(path).values()) == {iso(first - STEP)}

    # The next run (the store is back) starts at that window and ends in the direct collection.
    gateway.warn_starts_ms = set()
    again = through(gateway, None, history.last, page_points=PAGE)
    reports = run(path, again)
    assert len(reports) == len(pages) - partial_page and again.partial == []
    assert table(path).equals(want)
    assert set(watermarks(path).values()) == {iso(ms(history.last))}


def test_token_and_tenant_from_the_environment(
    history: History,
    reference: Path,
    gateway: TenantGateway,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The token by reference from the config file, the tenant straight from the environment.
    config_file = tmp_path / "preemptlens.toml"
    config_file.write_text(
        f'[cluster]\nname = "{CLUSTER}"\n\n[prometheus]\nurl = "{gateway.url}"\n'
        'bearer_token = { "$env" = "GATEWAY_TOKEN" }\n'
    )
    monkeypatch.setenv("GATEWAY_TOKEN", TOKEN)
    monkeypatch.setenv("PREEMPTLENS_PROMETHEUS__TENANT", TENANT)
    config = load_config(str(config_file))
    assert TOKEN not in repr(config.values)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    until = history.first + timedelta(hours=1)
    args = parser.parse_args(["--since", history.first.isoformat(), "--until", until.isoformat(), "--no-progress"])
    path = tmp_path / "w.duckdb"
    run(path, build(args, config))
    want = table(reference).filter(pl.col("time") <= until)
    assert want.height > 0 and table(path).equals(want)
    assert gateway.seen and all(s.status == 200 for s in gateway.seen)
    assert all(s.headers["authorization"] == f"Bearer {TOKEN}" for s in gateway.seen)


def test_a_long_retry_after_is_cut_to_the_setting(history: History, gateway: TenantGateway, tmp_path: Path) -> None:
    gateway.throttle_every, gateway.retry_after_s = 3, 600
    until = history.first + timedelta(hours=1)
    col = through(gateway, history.first, until, retries=3, max_retry_after_s=0.5)
    run(tmp_path / "w.duckdb", col)
    refused = [s for s in gateway.seen if s.status == 429]
    assert refused
    for one in refused:
        again = next(s for s in gateway.seen if s.at > one.at and s.params == one.params and s.path == one.path)
        # Cut to 0.5 s, far from the 600 asked for (the upper bound leaves room for a busy machine).
        assert 0.4 <= again.at - one.at < 60


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"concurrency": 0}, "prometheus.concurrency: 0 is under 1"),
        ({"tenant": "team-a", "headers": {"X-Scope-OrgID": "team-b"}}, "X-Scope-OrgID 'team-b' differ"),
    ],
)
def test_settings_that_contradict_themselves_are_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        collector("http://127.0.0.1:1", None, None, **settings)


def test_answers_are_asked_for_uncompressed_unless_the_headers_say_otherwise(
    history: History, gateway: TenantGateway, tmp_path: Path
) -> None:
    window = (history.first, history.first + timedelta(hours=1))
    run(tmp_path / "plain.duckdb", through(gateway, *window))
    assert {s.headers.get("accept-encoding") for s in gateway.seen} == {"identity"}
    gateway.seen.clear()
    gzip = through(gateway, *window, headers={"accept-encoding": "gzip"})
    run(tmp_path / "gzip.duckdb", gzip)
    assert {s.headers.get("accept-encoding") for s in gateway.seen} == {"gzip"}
    assert table(tmp_path / "gzip.duckdb").equals(table(tmp_path / "plain.duckdb"))
