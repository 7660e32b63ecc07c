"""The live cost over real HTTP: /live-costs (JSON, bounded) and its /metrics families (a histogram per pool,
the top N jobs), from hand-made live_costs rows; and serve's `cost` job storing and publishing them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
import requests

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.commands.serve import Server
from preemptlens.config import load_config
from preemptlens.contract import Batch, Watermark
from preemptlens.dashboards.metrics import METRICS, MetricsServer, SnapshotCollector
from preemptlens.warehouse import Warehouse
from tests.prometheus.conftest import free_port

EARLIER = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
LATEST = EARLIER + timedelta(minutes=5)
# (job, pool, team, tier, GPU-hours of cost or None: unknown) at the latest computation
JOBS = [
    ("j1", "a", "vision", "low", 0.05),
    ("j2", "a", "vision", "low", 3.0),
    ("j3", "a", "nlp", "normal", 700.0),
    ("j4", "a", "nlp", "low", None),
    ("j5", "b", "rl", "low", 12.0),
]


def live_row(job: str, pool: str, team: str, tier: str, hours: float | None, when: datetime) -> dict[str, object]:
    cost = None if hours is None else hours * 3600.0
    return {
        "cluster": "c1", "job_id": job, "run": 1, "pool": pool, "tier": tier, "team": team, "user_name": "u",
        "preemptible": True, "gpus": 4, "computed_at": when, "cost_gpu_s": cost,
        "at_risk_gpu_s": cost, "warmup_gpu_s": 0.0, "requeue_gpu_s": None if cost is None else 0.0,
        "basis": "checkpoint", "unknown": "requeue wait: none" if cost is None else None,
        "job_preemptions_recent": 0, "team_preemptions_recent": 0,
    }


def seed(path: Path) -> None:
    with Warehouse(path) as wh:
        analyze(wh, AnalyticsSettings())
        rows = [live_row("old", "a", "x", "low", 9999.0, EARLIER)]
        rows += [live_row(*job, LATEST) for job in JOBS]
        for row in rows:
            names = ", ".join(row)
            values = ", ".join(f"${k}" for k in row)
            wh.con.execute(f"INSERT INTO live_costs ({names}) VALUES ({values})", row)
        wh.con.execute("INSERT INTO live_cost_computations VALUES ($t, 1), ($u, 5)", {"t": EARLIER, "u": LATEST})
        wh.publish()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SnapshotCollector]]:
    path = tmp_path / "w.duckdb"
    seed(path)
    port = free_port()
    collector = SnapshotCollector(path, cache_s=0.0, top_jobs=2, endpoint_limit=3)
    server = MetricsServer(collector, "127.0.0.1", port, token=TOKEN)
    try:
        yield f"http://127.0.0.1:{port}", collector
    finally:
        server.stop()


# Job-level answers (/live-costs, the top jobs' series) need serve.metrics_token: tests/metrics/test_listener.py.
TOKEN = "scrape-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_live_costs_endpoint_is_json_costliest_first_and_bounded(served: tuple[str, SnapshotCollector]) -> None:
    url, _ = served
    answer = requests.get(f"{url}/live-costs", headers=AUTH, timeout=10)
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/json"
    body = answer.json()
    assert body["computed_at"] == LATEST.isoformat()
    # the earlier computation's job is not running any more; at most endpoint_limit (3) rows
    assert [j["job_id"] for j in body["jobs"]] == ["j3", "j5", "j2"]
    assert body["jobs"][0]["cost_gpu_s"] == 700.0 * 3600 and body["jobs"][0]["computed_at"] == LATEST.isoformat()
    asked_more = requests.get(f"{url}/live-costs", headers=AUTH, params={"limit": 1000}, timeout=10).json()
    assert len(asked_more["jobs"]) == 3 and asked_more["limit"] == 3
    pool_a = requests.get(f"{url}/live-costs", headers=AUTH, params={"pool": "a", "limit": 5}, timeout=10).json()
    assert [j["job_id"] for j in pool_a["jobs"]] == ["j3", "j2", "j1"]
    unknown = requests.get(f"{url}/live-costs", headers=AUTH, params={"cluster": "c1", "pool": "a", "limit": 3},
                           timeout=10)
    assert unknown.json()["limit"] == 3
    bad = requests.get(f"{url}/live-costs", headers=AUTH, params={"limit": "all"}, timeout=10)
    assert bad.status_code == 400 and "limit" in bad.json()["error"]
    assert requests.post(f"{url}/live-costs", headers=AUTH, timeout=10).status_code == 405


def test_the_unknown_cost_is_null_and_named(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    seed(path)
    status, body = SnapshotCollector(path, endpoint_limit=10).live_costs(10)
    assert status == 200
    (j4,) = [j for j in body["jobs"] if j["job_id"] == "j4"]
    assert j4["cost_gpu_s"] is None and j4["unknown"] == "requeue wait: none"
    assert body["jobs"][-1]["job_id"] == "j4", "an unknown cost after every known one"


def sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0] if "{" in line else ""))
            if found == labels:
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{labels} not exposed")


def test_metrics_expose_a_histogram_per_pool_and_the_top_jobs(served: tuple[str, SnapshotCollector]) -> None:
    url, _ = served
    text = requests.get(f"{url}/metrics", headers=AUTH, timeout=10).text
    hist = "preemptlens_live_cost_gpu_hours"
    assert f"# TYPE {hist} histogram" in text
    # pool a: known costs 0.05, 3 and 700 GPU-hours (j4's unknown cost is counted apart)
    assert sample(text, f"{hist}_bucket", cluster="c1", pool="a", le="0.1") == 1.0
    assert sample(text, f"{hist}_bucket", cluster="c1", pool="a", le="5.0") == 2.0
    assert sample(text, f"{hist}_bucket", cluster="c1", pool="a", le="500.0") == 2.0
    assert sample(text, f"{hist}_bucket", cluster="c1", pool="a", le="1000.0") == 3.0
    assert sample(text, f"{hist}_bucket", cluster="c1", pool="a", le="+Inf") == 3.0
    assert sample(text, f"{hist}_count", cluster="c1", pool="a") == 3.0
    assert sample(text, f"{hist}_sum", cluster="c1", pool="a") == pytest.approx(703.05)
    assert sample(text, f"{hist}_count", cluster="c1", pool="b") == 1.0
    assert sample(text, "preemptlens_live_cost_unknown_jobs", cluster="c1", pool="a") == 1.0
    assert sample(text, "preemptlens_live_cost_unknown_jobs", cluster="c1", pool="b") == 0.0
    # top_jobs = 2: exactly the two costliest, whatever the number of running jobs
    top = [line for line in text.splitlines() if line.startswith("preemptlens_live_cost_top_gpu_hours{")]
    assert len(top) == 2
    assert sample(text, "preemptlens_live_cost_top_gpu_hours", cluster="c1", pool="a", job_id="j3", team="nlp",
                  tier="normal") == 700.0
    assert sample(text, "preemptlens_live_cost_top_gpu_hours", cluster="c1", pool="b", job_id="j5", team="rl",
                  tier="low") == 12.0
    assert sample(text, "preemptlens_live_cost_computed_timestamp_seconds") == LATEST.timestamp()
    for name in ("preemptlens_live_cost_gpu_hours", "preemptlens_live_cost_top_gpu_hours"):
        assert name in METRICS
    docs = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    assert "/live-costs" in docs and all(f"`{name}`" in docs for name in METRICS)


def test_serve_cost_job_waits_for_analyze_then_stores_and_publishes(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    config = tmp_path / "serve.toml"
    config.write_text(f'[warehouse]\npath = "{path}"\n[serve]\njobs = ["cost"]\n')
    server = Server(load_config(str(config)), dashboard=False)
    assert server.cost().startswith("waiting for the first analyze")
    with Warehouse(path) as wh:
        analyze(wh, AnalyticsSettings())
        started = datetime.now(UTC) - timedelta(hours=1)
        wh.load("jobs", pl.DataFrame({"cluster": ["c1"], "job_id": ["r1"], "tier": ["low"], "preemptible": [True],
                                      "pool": ["a"], "gpus": [2], "submit_time": [started]}), "test")
        # A live read of the scheduler: it reports up to its cursor (now), though the run started an hour ago.
        wh.load_batch(Batch("test", {"job_runs": pl.DataFrame({
            "cluster": ["c1"], "job_id": ["r1"], "run": [1], "pool": ["a"], "gpus": [2], "start_time": [started],
            "state": ["running"]})}, watermarks=[Watermark("test", "c1", "sacct", datetime.now(UTC).isoformat())]))
    assert server.cost().startswith("1 running job(s), 1 of unknown cost")
    status, body = SnapshotCollector(path).live_costs(10)
    assert status == 200
    (job,) = body["jobs"]
    assert job["job_id"] == "r1" and job["basis"] == "assumed"
    assert job["at_risk_gpu_s"] == pytest.approx(2 * 3600, rel=0.01), "the run's whole hour, on its 2 GPUs"
