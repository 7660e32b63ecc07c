"""The Grafana dashboard: importable JSON whose every query names exposed metrics and runs on the real Prometheus."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from preemptlens.dashboards.metrics import METRICS
from tests.metrics.metrics_e2e import Scraped

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "grafana" / "preemptlens.json"
VARIABLES = {"cluster", "pool", "team", "datasource"}
# PromQL words that look like metric names but are not.
PROMQL_WORDS = {"sum", "by", "without", "count", "time", "sort_desc", "topk", "and", "on", "or", "unless"}


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def expressions(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]


def variable_queries(dashboard: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"}


def with_all(expr: str) -> str:
    """The expression as Grafana sends it with every variable at "All" (its allValue .*)."""
    return re.sub(r"\$(cluster|pool|team)\b", ".*", expr)


def metric_names(expr: str) -> set[str]:
    # Identifiers followed by a selector, a space, an operator or the end, outside label matchers and strings.
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_matchers = re.sub(r"\{[^}]*\}", "{}", without_strings)
    without_groupings = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", without_matchers)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_groupings))
    return {w for w in words if w not in PROMQL_WORDS and not w.isdigit()}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded = json.loads(DASHBOARD.read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_dashboard_is_importable(dashboard: dict[str, Any]) -> None:
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"] and dashboard["title"]
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert names == VARIABLES
    (source,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            # A variable the dashboard does not define would reach Prometheus as literal text.
            assert set(re.findall(r"\$(\w+)", target["expr"])) <= VARIABLES - {"datasource"}, target["expr"]


def test_every_query_names_only_exposed_metrics(dashboard: dict[str, Any]) -> None:
    seen: set[str] = set()
    for expr in [*expressions(dashboard), *variable_queries(dashboard).values()]:
        names = metric_names(expr.removeprefix("label_values(").rsplit(",", 1)[0] if "label_values" in expr else expr)
        assert names, expr
        assert names <= set(METRICS), (expr, names - set(METRICS))
        seen |= names
    # Every figure of the issue has a panel.
    for figure in (
        "preemptlens_net_benefit_gpu_hours",
        "preemptlens_lost_gpu_hours",
        "preemptlens_requeue_delay_seconds",
        "preemptlens_idle_hoarded_gpu_hours",
        "preemptlens_high_tier_share",
        "preemptlens_readiness",
        "preemptlens_last_analyze_timestamp_seconds",
        "preemptlens_collector_last_batch_timestamp_seconds",
    ):
        assert figure in seen, figure


@pytest.mark.slow
def test_every_query_runs_on_the_prometheus_that_scraped_serve(dashboard: dict[str, Any], scraped: Scraped) -> None:
    empty = []
    for expr in expressions(dashboard):
        result = scraped.query(with_all(expr))  # asserts status success
        if not result:
            empty.append(expr)
    # Only the "waiting for analyze" figures may be empty: serve's analyze took every load in.
    assert all("unanalyzed" in e for e in empty), empty
    for name, query in variable_queries(dashboard).items():
        match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
        assert match, query
        selector, label = with_all(match.group(1)), match.group(2)
        answer = requests.get(
            f"{scraped.prometheus.url}/api/v1/label/{label}/values",
            params={"match[]": selector, "start": scraped.at - 60, "end": scraped.at},
            timeout=10,
        ).json()
        assert answer["status"] == "success", (name, answer)
        assert answer["data"], f"variable {name} has no values"
