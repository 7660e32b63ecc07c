"""One cycle of the actions engine over many running jobs, beside the floor of reading their live costs.

    python benchmarks/bench_actions.py                    # 20,000 running jobs in 40 pools
    python benchmarks/bench_actions.py --jobs 100000 --repeat 5

A hand-made warehouse: `jobs`, `pools`, a run per job and `live_costs_latest` as a table (the live cost's
own branch computes it), costs spread so that about 5% of the jobs reach kueue_boost's high mark. It times,
each the median of --repeat runs:
- `floor`: the engine's own read of the live costs (the join with jobs and their last run), which no
  cycle can beat;
- `first cycle`: a dry-run cycle that holds up to max_jobs (1,000) of them, one audit row each;
- `steady cycle`: the next cycle, which keeps them (no row written).
Each line ends with the load average: figures are comparable only at a similar load.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
from timing import median_s

from preemptlens.analytics import actions
from preemptlens.config import load_config
from preemptlens.warehouse import Warehouse

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def build(path: Path, jobs: int) -> None:
    ids = [f"j{i}" for i in range(jobs)]
    pools = [f"p{i % 40}" for i in range(jobs)]
    with Warehouse(path) as wh:
        wh.load("pools", pl.DataFrame({"cluster": ["c1"] * 40, "pool": [f"p{i}" for i in range(40)],
                                       "valid_from": [NOW - timedelta(days=1)] * 40, "gpus": [8 * jobs // 40] * 40}),
                "bench")
        wh.load("jobs", pl.DataFrame({"cluster": "c1", "job_id": ids, "tier": "low", "preemptible": True,
                                      "pool": pools, "gpus": 8, "submit_time": NOW - timedelta(hours=6)}), "kubernetes")
        wh.load("job_runs", pl.DataFrame({"cluster": "c1", "job_id": ids, "run": 1, "pool": pools, "gpus": 8,
                                          "start_time": NOW - timedelta(hours=5), "state": "running"}), "bench")
        frame = pl.DataFrame({
            "cluster": "c1", "job_id": ids, "run": 1, "pool": pools, "tier": "low", "team": "t", "user_name": "u",
            "gpus": 8, "computed_at": NOW, "cost_gpu_s": [float((i * 7919) % 100) * 3600.0 * 0.4 for i in range(jobs)],
            "near_completion_share": None,
        }, schema_overrides={"near_completion_share": pl.Float64})
        wh.con.register("frame", frame.to_arrow())
        # One live-cost computation, as `preemptlens cost` stores it: live_costs_latest shows its rows.
        wh.con.execute("INSERT INTO live_costs BY NAME SELECT * FROM frame")
        wh.con.execute("INSERT INTO live_cost_computations VALUES ($t, $n)", {"t": NOW, "n": jobs})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = actions.settings_from(load_config(overrides={}))["kueue_boost"]
    s = {"kueue_boost": replace(base, enabled=True, max_jobs=1000)}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.duckdb"
        build(path, args.jobs)
        with Warehouse(path) as wh:
            cycle = actions._Cycle(wh, s["kueue_boost"], None, NOW)
            floor = median_s(cycle.live, args.repeat)

            def first() -> None:
                wh.con.execute("DELETE FROM actions")
                actions.run(wh, s, {}, NOW)

            first_s = median_s(first, args.repeat)
            held = wh.query("SELECT count(*) AS n FROM actions WHERE undone_at IS NULL")["n"][0]
            steady_s = median_s(lambda: actions.run(wh, s, {}, NOW + timedelta(minutes=1)), args.repeat)
    print(f"{args.jobs:,} running jobs, {held:,} held (load {load:.1f})")
    print(f"  floor (read live costs)  {floor * 1000:8.1f} ms")
    print(f"  first cycle (dry-run)    {first_s * 1000:8.1f} ms")
    print(f"  steady cycle             {steady_s * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
