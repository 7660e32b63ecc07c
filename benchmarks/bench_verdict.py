"""What the counterfactual headline and the verdict add to `analyze`, beside `analyze` without them.

Simulates the demo cluster once (256 GPUs, 21 days, as `preemptlens demo`), then, median of `--repeat` runs each,
on copies of that warehouse:

- analyze after new data without the counterfactual (params, idle stretches, every view, the verdict): the floor;
- analyze after new data with it (what `analyze` does once a cluster's data changed);
- analyze again on unchanged data (the counterfactual is not replayed: its inputs' fingerprint is the same);
- the counterfactual alone with one and with two worker processes.

    python benchmarks/bench_verdict.py [--gpus 256] [--days 21] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import median_s

from preemptlens.analytics.hoarding import infer_steps, refresh_stretches
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze, engine_settings, write_params
from preemptlens.analytics.simulator import simulate_into
from preemptlens.analytics.views import apply_views
from preemptlens.analytics.whatif import counterfactual, scorecard
from preemptlens.analytics.whatif.replay import default_window, load_workload
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.commands.demo import demo_config
from preemptlens.warehouse import Warehouse


def without_counterfactual(wh: Warehouse, params: AnalyticsSettings) -> None:
    """analyze's steps with the counterfactual left out (the views that read it see none)."""
    with engine_settings(wh):
        write_params(wh, params, infer_steps(wh, params.sample_step_s))
        refresh_stretches(wh, params, full=True)
        apply_views(wh)
        scorecard.refresh(wh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=int, default=21)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    params, tuning = AnalyticsSettings(), TuningSettings()
    folder = Path(tempfile.mkdtemp(prefix="bench-verdict-"))
    try:
        source = folder / "source.duckdb"
        with Warehouse(source) as wh:
            began = time.perf_counter()
            summary = simulate_into(wh, demo_config(args.days, args.gpus, seed=7))
            print(f"simulated {summary.jobs:,} jobs on {args.gpus} GPUs over {args.days} days "
                  f"({summary.samples:,} GPU samples) in {time.perf_counter() - began:.1f} s")

        def fresh() -> Warehouse:
            path = folder / "w.duckdb"
            for old in folder.glob("w.duckdb*"):
                old.unlink()
            shutil.copy(source, path)
            return Warehouse(path)

        def plain() -> None:
            with fresh() as wh:
                without_counterfactual(wh, params)

        def full() -> None:
            with fresh() as wh:
                analyze(wh, params, full=True, tuning=tuning)

        floor = median_s(plain, args.repeat)
        whole = median_s(full, args.repeat)
        with fresh() as wh:
            analyze(wh, params, full=True, tuning=tuning)
            again = median_s(lambda: analyze(wh, params, tuning=tuning), args.repeat)
            workload = load_workload(wh, default_window(wh, "demo"), tuning)
            alone = {
                n: median_s(lambda n=n: counterfactual.compute(wh, workload, params, 0.1, processes=n,
                                                               draws=tuning.jitter_replays), args.repeat)
                for n in (1, 2)
            }
        load = os.getloadavg()[0]
        print(f"machine load {load:.1f} (1-minute average, 2 cores), median of {args.repeat}:")
        print(f"  analyze after new data, without the counterfactual (floor)  {floor:6.2f} s")
        print(f"  analyze after new data, with it                             {whole:6.2f} s  "
              f"(+{whole - floor:.2f} s, {whole / floor:.2f}x)")
        print(f"  analyze again on unchanged data (not replayed)              {again:6.2f} s")
        print(f"  the counterfactual alone, 1 process                         {alone[1]:6.2f} s")
        print(f"  the counterfactual alone, 2 processes                       {alone[2]:6.2f} s "
              f"({len(workload.jobs):,} jobs, {2 + len(params.trigger_wait_candidates_s) + 1} scenarios x "
              f"{1 + tuning.jitter_replays} replays: tuning.jitter_replays)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
