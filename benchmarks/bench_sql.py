"""What running ad-hoc SQL in a child process costs per query.

Builds a small warehouse (ROWS job rows), then times the same queries two ways:
  - in-process: a read-only connection to the snapshot, opened and closed per query
    (what `preemptlens sql` did before queries moved into a child process),
  - child: `preemptlens.readonly.query`, which parses and checks the statement, forks a
    child from the fork server, opens the snapshot there under an address-space limit,
    runs the query and sends the result back as Arrow.
The first child query also starts the fork server (printed apart). Medians of REPEAT runs,
wall time. Run: python benchmarks/bench_sql.py [--rows N] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from preemptlens.readonly import Limits, current_snapshot, query
from preemptlens.warehouse import Warehouse

QUERIES = {
    "point": "SELECT 42 AS answer",
    "count": "SELECT count(*) FROM jobs",
    "group": "SELECT tier, count(*), sum(gpus) FROM jobs GROUP BY tier ORDER BY tier",
    "10k rows": "SELECT job_id, team, gpus FROM jobs ORDER BY job_id LIMIT 10000",
}


def build(path: Path, rows: int) -> None:
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    with Warehouse(path) as wh:
        wh.load(
            "jobs",
            pl.DataFrame(
                {
                    "cluster": ["c1"] * rows,
                    "job_id": [str(i) for i in range(rows)],
                    "team": [f"team{i % 17}" for i in range(rows)],
                    "tier": [("low", "normal", "high")[i % 3] for i in range(rows)],
                    "preemptible": [i % 3 == 0 for i in range(rows)],
                    "gpus": [1 + i % 8 for i in range(rows)],
                    "submit_time": [t0] * rows,
                }
            ),
            "bench",
        )


def in_process(snapshot: Path, sql: str) -> float:
    began = time.perf_counter()
    con = duckdb.connect(str(snapshot), read_only=True, config={"enable_external_access": False})
    try:
        con.sql(sql).limit(10_001).to_arrow_table()
    finally:
        con.close()
    return time.perf_counter() - began


def child(warehouse: Path, sql: str) -> float:
    began = time.perf_counter()
    query(warehouse, sql, Limits())
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        warehouse = Path(folder) / "w.duckdb"
        build(warehouse, args.rows)
        snapshot = current_snapshot(warehouse)
        first = child(warehouse, "SELECT 1")
        print(f"fork server start + first query: {first * 1000:.0f} ms (once per process)")
        print(f"{'query':10} {'in-process ms':>14} {'child ms':>10} {'overhead ms':>12}")
        for name, sql in QUERIES.items():
            inside = statistics.median(in_process(snapshot, sql) for _ in range(args.repeat))
            outside = statistics.median(child(warehouse, sql) for _ in range(args.repeat))
            print(f"{name:10} {inside * 1000:14.1f} {outside * 1000:10.1f} {(outside - inside) * 1000:12.1f}")


if __name__ == "__main__":
    main()
