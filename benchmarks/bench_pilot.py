"""Evaluating a preemption pilot on a 30-day 4,096-GPU warehouse, bootstrap included, beside the page floor.

    python benchmarks/bench_pilot.py                          # simulate 4,096 GPUs x 30 days, then measure
    python benchmarks/bench_pilot.py --warehouse w.duckdb     # measure it; simulate it there first if missing
    python benchmarks/bench_pilot.py --gpus 512 --days 30     # a smaller cluster
    python benchmarks/bench_pilot.py --warehouse w.duckdb --repeat 5 --no-browser

The simulated cluster has eight pools; preemption is off everywhere until day 15, when it is turned on in
the first four (the pilot) while the other four stay as they were (the control). It times, each the median
of --repeat runs:
- `evaluate (CLI)`: analytics.pilot.evaluate on the warehouse, as `preemptlens pilot NAME` runs it: the four
  observation queries plus every figure's bootstrap (pilot.bootstrap_samples = 1000 replicates);
- the same with 100 replicates, so the difference is the bootstrap's own cost at 1000;
- `evaluate (dashboard reader)`: the same through the read-only snapshot the dashboard reads;
and then, in headless Chromium (tests/dashboards/browser.py, as benchmarks/bench_dashboard.py does), the
first render of the Pilot page on a fresh server (nothing cached: the page evaluates the pilot) beside the
`floor`, a Streamlit page with a title and one metric served the same way in the same run, which no page
can beat. Each line ends with the load average: figures are comparable only at a similar load.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
from datetime import timedelta
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "dashboards"))

from timing import median_s  # noqa: E402

from preemptlens.analytics.pilot import Pilot, PilotSettings, evaluate, render  # noqa: E402
from preemptlens.analytics.simulator import (  # noqa: E402
    PolicyChange,
    PolicyConfig,
    SimConfig,
    cluster_of,
)
from preemptlens.dashboards.data import reader  # noqa: E402
from preemptlens.reading.masking import EVERYTHING  # noqa: E402
from preemptlens.warehouse import Warehouse  # noqa: E402

CHANGE_DAY = 15.0


def sim_config(gpus: int, days: float, step: int) -> SimConfig:
    pools = cluster_of(gpus, pools=8)
    names = tuple(p.name for p in pools)
    change = PolicyChange(CHANGE_DAY * 86400.0, names[:4], PolicyConfig())
    return SimConfig(cluster=f"pilot{gpus}", days=days, pools=pools, policy=PolicyConfig(enabled=False),
                     changes=(change,), sample_step_s=step)


def pilot_of(config: SimConfig) -> Pilot:
    names = tuple(p.name for p in config.pools)
    return Pilot(name="bench", cluster=config.cluster, pools=names[:4], control=names[4:],
                 start=config.start + timedelta(days=CHANGE_DAY), what="preemption on")


def _load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def time_evaluation(warehouse: Path, pilot: Pilot, repeat: int) -> None:
    full = PilotSettings()
    few = dataclasses.replace(full, bootstrap_samples=100)
    with Warehouse(warehouse) as wh:
        ev = evaluate(wh.query, pilot, full)  # untimed: fills DuckDB's caches as a second reader would find them
        print(render(ev))
        cli = median_s(lambda: evaluate(wh.query, pilot, full), repeat)
        cli_few = median_s(lambda: evaluate(wh.query, pilot, few), repeat)
    with reader(warehouse, scope=EVERYTHING) as r:
        evaluate(r.frame, pilot, full)
        dash = median_s(lambda: evaluate(r.frame, pilot, full), repeat)
    jobs = ev.figure("retries_per_job").n
    print(f"\nobservations: {sum(jobs):,} jobs, {sum(ev.figure('high_wait_p50_s').n):,} critical+high runs, "
          f"{sum(ev.figure('allocated_share').n):,} pool-days")
    print(f"{'step':44} {'seconds':>8}   (median of {repeat})")
    print(f"{'evaluate (CLI), 1000 replicates':44} {cli:8.2f}")
    print(f"{'evaluate (CLI), 100 replicates':44} {cli_few:8.2f}   bootstrap at 1000: ~{cli - cli_few:.2f} s more")
    print(f"{'evaluate (dashboard reader), 1000 replicates':44} {dash:8.2f}   {_load()}")


def time_page(warehouse: Path, pilot: Pilot, repeat: int, folder: Path) -> None:
    from bench_dashboard import FLOOR_TITLE, Floor, _visit
    from browser import Chromium, Dashboard, free_port

    config = folder / "preemptlens.toml"
    config.write_text(
        "[pilot.pilots.bench]\n"
        f'cluster = "{pilot.cluster}"\npools = {list(pilot.pools)!r}\ncontrol = {list(pilot.control)!r}\n'
        f'start = "{pilot.start.isoformat()}"\nwhat = "{pilot.what}"\n'.replace("'", '"')
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
    env["PREEMPTLENS_CONFIG"] = str(config)
    log = warehouse.with_name(f"{warehouse.name}.bench-pilot-streamlit.log")  # kept for a failed render
    port = free_port()
    measured: dict[str, list[tuple[float | None, float | None, bool]]] = {"floor": [], "pilot": []}
    with Chromium() as browser:
        # An untimed first visit, so the browser holds Streamlit's bundles as a returning reader's does.
        with Floor(log, port) as floor:
            browser.fresh_tab()
            _visit(browser, FLOOR_TITLE, 0, partial(browser.navigate, floor.url))
        for _ in range(repeat):
            with Floor(log, port) as floor:
                browser.fresh_tab()
                measured["floor"].append(_visit(browser, FLOOR_TITLE, 0, partial(browser.navigate, floor.url)))
            with Dashboard(warehouse, log, port, env=env) as dashboard:
                browser.fresh_tab()
                measured["pilot"].append(
                    _visit(browser, "Pilot evaluation", 0, partial(browser.navigate, f"{dashboard.url}/pilot"))
                )

    def mid(values: list[float | None]) -> str:
        return "–" if None in values else f"{statistics.median(v for v in values if v is not None):5.2f}"

    print(f"\nseconds to the first meaningful render / complete page, fresh server, median of {repeat}")
    for name, visits in (("floor: Streamlit only", measured["floor"]), ("Pilot page", measured["pilot"])):
        ok = all(v[2] for v in visits)
        print(f"{name:24} {mid([v[0] for v in visits])} / {mid([v[1] for v in visits])}  "
              f"{'ok' if ok else 'NOT RENDERED (see ' + str(log) + ')'}")
    print(_load())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", type=Path, help="warehouse to measure (simulated there first if missing)")
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--sample-step", type=int, default=60, help="GPU sampling step of the simulation, seconds")
    parser.add_argument("--repeat", type=int, default=3, help="runs of every timing; the median is shown")
    parser.add_argument("--no-browser", action="store_true", help="skip the page and floor in Chromium")
    parser.add_argument("--page-only", action="store_true", help="only the page and floor in Chromium")
    args = parser.parse_args()
    config = sim_config(args.gpus, args.days, args.sample_step)
    with tempfile.TemporaryDirectory(prefix="bench-pilot-") as tmp:
        warehouse = args.warehouse or Path(tmp) / "w.duckdb"
        if not warehouse.exists():
            from bench_dashboard import simulate_and_analyze

            simulate_and_analyze(warehouse, config)
        pilot = pilot_of(config)
        if not args.page_only:
            time_evaluation(warehouse, pilot, max(args.repeat, 1))
        if not args.no_browser:
            time_page(warehouse, pilot, max(args.repeat, 1), Path(tmp))


if __name__ == "__main__":
    main()
