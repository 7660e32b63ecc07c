"""First render time of each dashboard page, measured in headless Chromium.

    python benchmarks/bench_dashboard.py                          # simulate 4,096 GPUs x 30 days, then measure
    python benchmarks/bench_dashboard.py --gpus 512 --days 30     # a smaller cluster
    python benchmarks/bench_dashboard.py --warehouse w.duckdb     # measure an existing, analysed warehouse

Serves dashboards/app.py with Streamlit on a free localhost port and opens
every page in headless Chromium three times: `cold load` is the first visit
after the server started, by URL (the browser loads the app, the page runs its
queries; later pages find some of them warmed up in the background), `warm
load` a later visit by URL (queries answered from the cache), `in-app` a
switch through the sidebar link as a reader does (no reload). A page has
rendered when Streamlit stopped running it, it shows its title and every
plotly chart drew its SVG. The target is under
2 s per page. It also times each dashboard query alone, so a slow page points
at its slow view. Like every reader it reads through <warehouse>.snapshot,
which it creates or refreshes next to a given warehouse.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dashboards"))

from browser import Chromium, Dashboard  # noqa: E402 -- the test suite's CDP driver

from analytics.params import params_from  # noqa: E402
from analytics.refresh import analyze  # noqa: E402
from analytics.simulator import SimConfig, cluster_of, simulate_into  # noqa: E402
from dashboards import data  # noqa: E402
from preemptlens.config import load_config  # noqa: E402
from preemptlens.warehouse import Warehouse  # noqa: E402

# URL path, page title, sidebar label
PAGES = (
    ("", "Preemption overview", "Overview"),
    ("preemptions", "Preemptions", "Preemptions"),
    ("hoarding", "Idle hoarding", "Idle hoarding"),
    ("scope_creep", "Priority scope creep", "Priority scope creep"),
    ("tuning", "Tuning suggestions", "Tuning"),
    ("sql", "SQL", "SQL"),
)


def build(path: Path, gpus: int, days: float, step: int) -> None:
    config = SimConfig(cluster=f"bench{gpus}", days=days, pools=cluster_of(gpus, pools=4), sample_step_s=step)
    began = time.perf_counter()
    with Warehouse(path) as wh:
        summary = simulate_into(wh, config, progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
        print("\n".join(summary.lines()))
        analyze(wh, params_from(load_config(None)))
    print(f"built and analysed {path} in {time.perf_counter() - began:.0f} s")


def time_queries(warehouse: Path) -> None:
    with data.reader(warehouse) as r:
        options = data.options(r)
        assert options.last is not None
        end = options.last
        f = data.Filters(start=end - timedelta(days=30), end=end + timedelta(seconds=1))
        calls = {
            "ledger": (f,), "hoarded": (f,), "net_benefit": (f,), "scorecard": (f,), "evidence": (f,),
            "top_holders": (f, "team", 15), "idle_daily": (f,),
            "tier_shares": (f,), "team_high_shares": (f,), "team_slopes": (f,), "scope_trend": (f,),
            "suggestions": (f, 15), "catalog": (),
        }
        print(f"\n{'query':24} {'seconds':>8} {'rows':>8}")
        for name, args in calls.items():
            began = time.perf_counter()
            result = data.QUERIES[name](r, *args)
            rows = getattr(result, "height", 1)
            print(f"{name:24} {time.perf_counter() - began:8.2f} {rows:8}")


def time_pages(warehouse: Path, log: Path) -> None:
    measured: dict[tuple[str, str], tuple[float, bool]] = {}
    with Dashboard(warehouse, log) as dashboard, Chromium() as browser:
        for path, title, _ in PAGES:
            browser.navigate(f"{dashboard.url}/{path}")
            state, seconds = browser.wait_rendered(timeout_s=300, title=title)
            measured[(title, "cold")] = (seconds, state.rendered and not state.exceptions and not state.errors)
        for visit in ("load", "nav"):
            for path, title, label in PAGES:
                if visit == "load":
                    browser.navigate(f"{dashboard.url}/{path}")
                else:
                    browser.click_nav(label)
                state, seconds = browser.wait_rendered(timeout_s=300, title=title)
                measured[(title, visit)] = (seconds, state.rendered and not state.exceptions and not state.errors)
    print(f"\n{'page':22} {'cold load':>9} {'warm load':>9} {'in-app':>7}  ok")
    for _, title, _ in PAGES:
        cold, load, nav = (measured[(title, v)] for v in ("cold", "load", "nav"))
        ok = "yes" if cold[1] and load[1] and nav[1] else "NO"
        print(f"{title:22} {cold[0]:9.2f} {load[0]:9.2f} {nav[0]:7.2f}  {ok}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warehouse", type=Path, help="an analysed warehouse to measure (default: simulate one)")
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--sample-step", type=int, default=60, help="GPU sampling step of the simulation, seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        warehouse = args.warehouse
        if warehouse is None:
            warehouse = Path(tmp) / "w.duckdb"
            build(warehouse, args.gpus, args.days, args.sample_step)
        time_queries(warehouse)
        time_pages(warehouse, Path(tmp) / "streamlit.log")


if __name__ == "__main__":
    main()
