"""Wall time of the simulator, end to end into a DuckDB file.

    python benchmarks/bench_simulator.py                 # 512 and 4,096 GPUs, 30 days
    python benchmarks/bench_simulator.py --gpus 512 --days 30

Prints one row per case: scheduling time, load time (frames + load API), rows
and rows/s. The 512-GPU, 30-day case must finish in under 2 minutes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from preemptlens.analytics.simulator import SimConfig, cluster_of, simulate_into
from preemptlens.warehouse import Warehouse


def bench(gpus: int, days: float, directory: Path) -> None:
    config = SimConfig(cluster=f"bench{gpus}", days=days, pools=cluster_of(gpus))
    path = directory / f"sim_{gpus}.duckdb"
    began = time.perf_counter()

    def progress(message: str) -> None:
        print(f"  [{time.perf_counter() - began:7.1f} s] {message}", file=sys.stderr, flush=True)

    with Warehouse(path) as wh:
        summary = simulate_into(wh, config, progress=progress)
    total = time.perf_counter() - began
    size_mib = path.stat().st_size / 2**20
    print(
        f"{gpus:>6} GPUs {days:>4g} d | jobs {summary.jobs:>7,} preemptions {summary.preemptions:>6,} | "
        f"simulate {summary.simulate_s:6.1f} s  load {summary.load_s:6.1f} s  total {total:6.1f} s | "
        f"{summary.loaded:>12,} rows  {summary.loaded / summary.load_s:>10,.0f} rows/s | {size_mib:,.0f} MiB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[512, 4096])
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--dir", type=Path, help="where to write the DuckDB files (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.dir or Path(tmp)
        for gpus in args.gpus:
            bench(gpus, args.days, directory)


if __name__ == "__main__":
    main()
