"""Throughput of the load API (Warehouse.load_batch) per table, on simulated rows.

    python benchmarks/bench_load.py [--gpus 512] [--days 3]

Loads a simulated cluster's tables into a fresh DuckDB file, then loads the
same batches again (everything unchanged), and prints rows/s for both passes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from preemptlens.analytics.simulator import SimConfig, cluster_of, simulate
from preemptlens.warehouse import Warehouse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--days", type=float, default=3.0)
    args = parser.parse_args()
    sim = simulate(SimConfig(cluster="bench", days=args.days, pools=cluster_of(args.gpus)))
    batches = list(sim.batches())
    with tempfile.TemporaryDirectory() as tmp, Warehouse(Path(tmp) / "load.duckdb") as wh:
        for label in ("first load", "reload (unchanged)"):
            seconds: dict[str, float] = defaultdict(float)
            rows: dict[str, int] = defaultdict(int)
            for batch in batches:
                began = time.perf_counter()
                wh.load_batch(batch)
                elapsed = time.perf_counter() - began
                total = sum(f.height for f in batch.frames.values())
                for table, frame in batch.frames.items():
                    # A batch's time is shared among its tables by row count.
                    seconds[table] += elapsed * frame.height / max(total, 1)
                    rows[table] += frame.height
            print(f"{label}:")
            for table in sorted(rows):
                rate = rows[table] / seconds[table] if seconds[table] else 0.0
                print(f"  {table:<24} {rows[table]:>12,} rows {seconds[table]:8.2f} s {rate:>12,.0f} rows/s")
            all_rows, all_s = sum(rows.values()), sum(seconds.values())
            print(f"  {'all':<24} {all_rows:>12,} rows {all_s:8.2f} s {all_rows / all_s:>12,.0f} rows/s")


if __name__ == "__main__":
    main()
