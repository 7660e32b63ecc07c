"""The live preemption cost on a simulated warehouse, beside `analyze` (its peer: the other periodic job of serve).

    python benchmarks/bench_live_cost.py                       # simulate 512 GPUs x 14 days, then measure
    python benchmarks/bench_live_cost.py --gpus 4096 --days 30 # a larger cluster
    python benchmarks/bench_live_cost.py --warehouse w.duckdb  # measure it; simulate it there first if missing

It times, each the median of --repeat runs at a few instants within the last day of the data (the simulator's
runs all end, so an instant in the past is when jobs run): `compute` (analytics.livecost.compute: the named
query over the raw tables, the ledger and expected_requeue, stored in live_costs; what `preemptlens cost` and
serve's cost job do), `read /metrics families` (the live-cost families from the table), and `analyze` once.
Each line ends with the load average: figures are comparable only at a similar load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dashboard import simulate_and_analyze  # noqa: E402
from timing import median_s  # noqa: E402

from preemptlens.analytics.livecost import LiveCostSettings, compute  # noqa: E402
from preemptlens.analytics.params import AnalyticsSettings  # noqa: E402
from preemptlens.analytics.refresh import analyze  # noqa: E402
from preemptlens.analytics.simulator import SimConfig, cluster_of  # noqa: E402
from preemptlens.dashboards.metrics import live_cost_families  # noqa: E402
from preemptlens.warehouse import Warehouse  # noqa: E402


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--days", type=float, default=14.0)
    parser.add_argument("--warehouse", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    path = args.warehouse or Path(tempfile.mkdtemp()) / "w.duckdb"
    if not path.exists():
        simulate_and_analyze(path, SimConfig(cluster=f"live{args.gpus}", days=args.days, pools=cluster_of(args.gpus)))
    settings = LiveCostSettings()
    with Warehouse(path) as wh:
        (end,) = wh.con.execute("SELECT max(end_time) FROM job_runs").fetchall()[0]
        instants = [end - timedelta(hours=2 * (i + 1)) for i in range(args.repeat)]
        seconds, jobs = [], []
        for at in instants:
            began = time.perf_counter()
            done = compute(wh, at, settings)
            seconds.append(time.perf_counter() - began)
            jobs.append(done.jobs)
        print(f"{'compute':26} {statistics.median(seconds):8.3f} s  median of {len(seconds)}, "
              f"{statistics.median(jobs):.0f} running jobs each  ({load()})")
        read = median_s(lambda: live_cost_families(wh.con, settings.top_jobs), args.repeat)
        print(f"{'read /metrics families':26} {read:8.3f} s  median of {args.repeat}  ({load()})")
        began = time.perf_counter()
        report = analyze(wh, AnalyticsSettings())
        print(f"{'analyze (peer)':26} {time.perf_counter() - began:8.3f} s  once; of it the view "
              f"preemption_live_costs {report.view_seconds['preemption_live_costs']:.3f} s  ({load()})")


if __name__ == "__main__":
    main()
