"""What the metrics tests share: the simulated cluster's shape, the secrets serve holds, the scraped result."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import requests

from tests.prometheus.conftest import PrometheusServer

CLUSTER = "mx"
TOP_TEAMS = 3
TEAMS = 9
# Secrets the configuration of serve holds; none may appear on /metrics or in its log.
TOKEN = "tok-5d1c0ffee-never-shown"
WEBHOOK = "https://hooks.example.invalid/T000/B000/s3cr3t-never-shown"


@dataclass
class Scraped:
    """What the end-to-end run left behind: Prometheus (still up) and serve's output (stopped)."""

    prometheus: PrometheusServer
    warehouse: Path
    at: float  # a moment at which Prometheus held serve's final figures
    exposition: str  # /metrics as serve answered it then
    serve_status: int
    serve_log: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = requests.get(
            f"{self.prometheus.url}/api/v1/query", params={"query": expr, "time": self.at}, timeout=10
        ).json()
        assert answer["status"] == "success", (expr, answer)
        return list(answer["data"]["result"])


def warehouse_rows(path: Path, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        cursor = con.execute(sql, params or {})
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()
