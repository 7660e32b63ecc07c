"""First render time of each dashboard page, measured in headless Chromium.

    python benchmarks/bench_dashboard.py                          # simulate 4,096 GPUs x 30 days, then measure
    python benchmarks/bench_dashboard.py --gpus 512 --days 30     # a smaller cluster
    python benchmarks/bench_dashboard.py --warehouse w.duckdb     # measure it; simulate it there first if missing
    python benchmarks/bench_dashboard.py --warehouse w.duckdb --browser-only --repeat 3   # only the browser, medians
    python benchmarks/bench_dashboard.py --warehouse w.duckdb --browser-only --after-start --unwarmed --cold --repeat 3
    python benchmarks/bench_dashboard.py --warehouse w.duckdb --after-writer --base /tmp/base --repeat 3
    python benchmarks/bench_dashboard.py --versus-demo /tmp/fd --gpus 16384 --days 7 --repeat 3   # fleet vs demo

Serves dashboards/app.py as `preemptlens dashboard` does (through
dashboards.launch) on a free localhost port and opens every page in headless
Chromium, each page load in a fresh tab (a new Streamlit session; only the
browser's HTTP cache survives), the clock started before the navigation:
- `after start`: the first page a reader opens once a new server answers its
  health check, with nothing in the query cache: a new server for every page
  (the launcher has imported the modules, drawn plotly's first figures and
  opened the snapshot before the server answers), always at the same address,
  as a deployed dashboard restarts: the reader's browser holds Streamlit's and
  plotly's bundles from an untimed visit before;
- `cold` (with --cold): the same on a new port each time, so the browser
  fetches and compiles every bundle again, as on a reader's first visit ever;
- `unwarmed` (with --unwarmed): the same, served by plain `streamlit run`,
  where the first reader's session pays for those too; each page's unwarmed
  and warmed servers are started back to back;
- `warm load`: one server, every page opened once before (its queries cached);
- `in-app`: a switch through the sidebar link as a reader does (no reload);
- with --after-writer (alone): each page on a warm server right after a writer
  committed (`preemptlens cost`), as serve's jobs do every few minutes, and
  with --base DIR the same from another checkout, page by page in turn.
Each shows two times: `first`, the first meaningful render (the title and a
first chart, table, metric or message on screen), and `done`, when Streamlit
stopped running the page and every plotly chart drew its SVG. The target is
under 2 s per page. A page's charts are sent after its metrics and tables
(dashboards.views_common.Charts), so `first` is normally a table or a metric
and `done` includes plotly.js. `--repeat N` measures every visit N times and
shows the median; --after-start measures the `after start` (and `unwarmed`)
columns only. The first row, `floor`, is Streamlit itself: a page with a
title and one metric (nothing of ours) served with the dashboard's options
in the same way; no page can render before it. Each table shows the load
average when it ended: the figures are only comparable at a similar load.
With --versus-demo DIR (alone) it builds the demo (`preemptlens demo`) and a fleet of --gpus x --days
through the CLI in DIR (kept for the next run) and shows every page's first render on the fleet beside the
demo's and the floor's, new servers in turn, page by page (time_versus_demo): issue 35 asks for each page
within 2x of the demo's.
Before that (unless --browser-only) it times, in this process, the app's imports,
each dashboard query alone (a slow page points at its slow view; `open` is
the first query, which also opens the snapshot) and each page's figures
(building them, and the JSON and table sizes sent to the browser). Like every
reader it reads through <warehouse>.snapshot, which it creates or refreshes
next to a given warehouse.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import plotly.graph_objects as go
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dashboards"))

from browser import Chromium, Dashboard, free_port  # noqa: E402 -- the test suite's CDP driver

from preemptlens.analytics.params import AnalyticsSettings  # noqa: E402
from preemptlens.analytics.refresh import analyze  # noqa: E402
from preemptlens.analytics.simulator import SimConfig, cluster_of, simulate_into  # noqa: E402
from preemptlens.commands import dashboard as dashboard_command  # noqa: E402
from preemptlens.config import load_config  # noqa: E402
from preemptlens.dashboards import data, figures  # noqa: E402
from preemptlens.reading.masking import EVERYTHING  # noqa: E402
from preemptlens.warehouse import Warehouse  # noqa: E402

# URL path, page title, sidebar label, plotly charts on the page
PAGES = (
    ("", "Preemption overview", "Overview", 1),
    ("preemptions", "Preemptions", "Preemptions", 3),
    ("hoarding", "Idle hoarding", "Idle hoarding", 2),
    ("scope_creep", "Priority scope creep", "Priority scope creep", 3),
    ("tuning", "Tuning suggestions", "Tuning", 0),
    ("pilot", "Pilot evaluation", "Pilot", 0),
    ("mine", "My preemptions", "My preemptions", 0),
    ("operations", "Operations", "Operations", 0),
    ("sql", "SQL", "SQL", 0),
)


def build(path: Path, gpus: int, days: float, step: int) -> None:
    simulate_and_analyze(path, SimConfig(cluster=f"bench{gpus}", days=days, pools=cluster_of(gpus, pools=4),
                                         sample_step_s=step))


def simulate_and_analyze(path: Path, config: SimConfig) -> None:
    """A benchmark's warehouse: `config` simulated into `path`, then analysed with the default settings."""
    began = time.perf_counter()
    with Warehouse(path) as wh:
        summary = simulate_into(wh, config, progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
        print("\n".join(summary.lines()))
        analyze(wh, load_config(None).of(AnalyticsSettings))
    print(f"built and analysed {path} in {time.perf_counter() - began:.0f} s")


# (already imported, then timed): what the server imports at start, what the launcher adds before
# the server answers (without it, the first page's session)
IMPORTS = {
    "streamlit (server start)": ("pass", "import streamlit"),
    "launcher warm-up": ("import streamlit", "import preemptlens.dashboards.launch as launch; launch.warm()"),
}


def time_imports(warehouse: Path) -> None:
    print(f"\n{'import':28} {'seconds':>8}")
    env = {**os.environ, "PREEMPTLENS_WAREHOUSE__PATH": str(warehouse)}
    for label, (before, statement) in IMPORTS.items():
        script = f"import time; {before}; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT, env=env
        )
        print(f"{label:28} {float(out.stdout.split()[-1]):8.2f}")


def _size(value: object) -> int:
    return len(pickle.dumps(value))


def time_queries(warehouse: Path) -> data.Filters:
    """Each query twice: the first of all also opens the snapshot; the second reads warm blocks."""
    print(f"\n{'query':24} {'first s':>8} {'again s':>8} {'rows':>8} {'cached kB':>10}")
    began = time.perf_counter()
    with data.reader(warehouse, scope=EVERYTHING) as r:
        options = data.options(r)
    print(f"{'options (opens snapshot)':24} {time.perf_counter() - began:8.2f}")
    assert options.last is not None
    end = options.last
    f = data.Filters(start=end - timedelta(days=30), end=end + timedelta(seconds=1))
    rows, top_n = 2000, 15
    opened = data.page_queries(f, rows=rows, top_n=top_n, markers=figures.TIMELINE_MARKERS)
    calls = {name: tuple(args) for name, *args in opened}
    calls["ledger"] = (f,)
    for name, args in calls.items():
        seconds = []
        for _ in range(2):
            began = time.perf_counter()
            with data.reader(warehouse, scope=EVERYTHING) as r:
                result = data.QUERIES[name](r, *args)
            seconds.append(time.perf_counter() - began)
        frame = result[0] if isinstance(result, tuple) else result
        height = getattr(frame, "height", 1)
        print(f"{name:24} {seconds[0]:8.2f} {seconds[1]:8.2f} {height:8} {_size(result) / 1e3:10.1f}")
    print(_load())
    return f


def time_figures(warehouse: Path, f: data.Filters) -> None:
    """What each page builds from its (cached) query results and sends to the browser: the seconds
    to build its figures and their JSON, the JSON's size, its tables' size (Arrow) and chart points."""
    with data.reader(warehouse, scope=EVERYTHING) as r:
        q: Callable[..., Any] = partial(_query, r)
        head = q("headline", f)
        opened = data.page_queries(f, rows=2000, top_n=15, markers=figures.TIMELINE_MARKERS)
        results = {name: q(name, *args) for name, *args in opened if name not in ("headline", "suggestions", "catalog")}
    pages: dict[str, tuple[list[Callable[[], go.Figure]], list[pl.DataFrame]]] = {
        "Overview": (
            [partial(figures.net_benefit, results["net_benefit"])], [results["scorecard"], results["evidence"]]
        ),
        "Preemptions": (
            [partial(figures.preemption_timeline, results["worst"], total=head["preemptions"])],
            [results["ledger_page"], results["top_victims"]],
        ),
        "Idle hoarding": (
            [partial(figures.top_holders, results["top_holders"], "top"),
             partial(figures.idle_daily, results["idle_daily"])],
            [results["avoidable_rows"][0]],
        ),
        "Priority scope creep": (
            [partial(figures.tier_shares, results["tier_shares"]),
             partial(figures.team_high_shares, results["team_high_shares"]),
             partial(figures.team_slopes, results["team_slopes"])],
            [results["team_slopes"], results["scope_trend"]],
        ),
    }
    figures.net_benefit(results["net_benefit"]).to_json()  # plotly imports its validators on first use
    print(f"\n{'page':22} {'figures s':>9} {'JSON kB':>8} {'tables kB':>9} {'points':>7}")
    for page, (builders, tables) in pages.items():
        began = time.perf_counter()
        built = [build() for build in builders]
        sent = sum(len(fig.to_json()) for fig in built)
        seconds = time.perf_counter() - began
        size = sum(t.to_arrow().nbytes for t in tables)
        points = sum(len(t.x or ()) for fig in built for t in fig.data)
        print(f"{page:22} {seconds:9.2f} {sent / 1e3:8.1f} {size / 1e3:9.1f} {points:7}")
    print(_load())


def _query(r: data.Reader, name: str, *args: Any) -> Any:
    return data.QUERIES[name](r, *args)


def _load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


FLOOR_TITLE = "Floor"
FLOOR_APP = f"""
import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
st.title("{FLOOR_TITLE}")
st.metric("Preemptions", "33,156")
"""


class Floor(Dashboard):
    """A page of Streamlit alone (a title and a metric), served with `preemptlens dashboard`'s options."""

    def __init__(self, log: Path, port: int | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="bench-floor-"))
        app = self.folder / "floor.py"
        app.write_text(FLOOR_APP)
        self.port = port or free_port()
        args = argparse.Namespace(port=self.port, address="127.0.0.1")
        argv = dashboard_command.command(args, load_config(None))
        argv[argv.index(str(dashboard_command.APP))] = str(app)
        self.serve(argv, log)

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.folder, ignore_errors=True)


class Unwarmed(Dashboard):
    """The dashboard served by plain `streamlit run` with `preemptlens dashboard`'s options, as it was
    before dashboards.launch: the first reader's session imports, draws and opens everything."""

    def __init__(self, warehouse: Path, log: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
        env["PREEMPTLENS_WAREHOUSE__PATH"] = str(warehouse)
        argv = [sys.executable, "-m", "streamlit", "run", str(dashboard_command.APP), *dashboard_command.SERVED,
                "--server.port", str(self.port), "--server.address", "127.0.0.1"]
        self.serve(argv, log, env)


Visit = tuple[float | None, float | None, bool]


def _median(visits: list[Visit]) -> Visit:
    def mid(values: list[float | None]) -> float | None:
        return None if None in values else statistics.median(v for v in values if v is not None)

    return mid([v[0] for v in visits]), mid([v[1] for v in visits]), all(v[2] for v in visits)


def _visit(browser: Chromium, title: str, charts: int, go_to: Callable[[], None]) -> Visit:
    began = time.monotonic()
    go_to()
    state, first, done = browser.wait_page(began, timeout_s=300, title=title, charts=charts)
    return first, done, state.rendered and not state.exceptions and not state.errors


def _visit_untimed(browser: Chromium, warehouse: Path, log: Path, port: int,
                   pages: Sequence[tuple[str, str, str, int]]) -> None:
    """Every page once on a server at `port`, not timed: the browser then holds Streamlit's and plotly's
    bundles, as a reader's does after a first visit."""
    with Dashboard(warehouse, log, port) as dashboard:
        for path, title, _, charts in pages:
            browser.fresh_tab()
            _visit(browser, title, charts, partial(browser.navigate, f"{dashboard.url}/{path}"))


def time_pages(
    warehouse: Path, log: Path, repeat: int, after_start_only: bool, unwarmed: bool, cold: bool
) -> None:
    measured: dict[tuple[str, str], list[Visit]] = {}

    def visit(key: tuple[str, str], title: str, charts: int, go_to: Callable[[], None]) -> None:
        measured.setdefault(key, []).append(_visit(browser, title, charts, go_to))

    # Every restarted server answers at one address, as a deployed dashboard does: the browser keeps
    # Streamlit's and plotly's bundles from the untimed first visit (a first visit ever also fetches
    # and compiles them: the `cold` column, each server on a new port).
    port = free_port()
    starts: list[tuple[str, Callable[[], Dashboard]]] = [("start", partial(Dashboard, warehouse, log, port))]
    if unwarmed:
        starts.insert(0, ("unwarmed", partial(Unwarmed, warehouse, log, port)))
    if cold:
        starts.append(("cold", partial(Dashboard, warehouse, log)))
    with Chromium() as browser:
        _visit_untimed(browser, warehouse, log, port, PAGES)
        for _ in range(repeat):
            for path, title, _, charts in (("", FLOOR_TITLE, "", 0), *PAGES):
                for kind, server in starts:
                    if title == FLOOR_TITLE and kind == "unwarmed":
                        continue
                    floor = partial(Floor, log, None if kind == "cold" else port)
                    with floor() if title == FLOOR_TITLE else server() as dashboard:
                        browser.fresh_tab()
                        visit((title, kind), title, charts, partial(browser.navigate, f"{dashboard.url}/{path}"))
        if not after_start_only:
            with Floor(log) as floor:
                for visited in ("once", *["load"] * repeat):
                    browser.fresh_tab()
                    visit((FLOOR_TITLE, visited), FLOOR_TITLE, 0, partial(browser.navigate, floor.url))
            measured[(FLOOR_TITLE, "nav")] = [(None, None, True)]
            with Dashboard(warehouse, log) as dashboard:
                for visited in ("once", *["load"] * repeat):
                    for path, title, _, charts in PAGES:
                        browser.fresh_tab()
                        visit((title, visited), title, charts, partial(browser.navigate, f"{dashboard.url}/{path}"))
                for _ in range(repeat):
                    for _, title, label, charts in PAGES:
                        visit((title, "nav"), title, charts, partial(browser.click_nav, label))

    def shown(v: Visit | None) -> str:
        if v is None:
            return f"{'':11}"
        return " ".join(f"{t:5.2f}" if t is not None else "    –" for t in v[:2])

    columns = {"cold": "cold", "unwarmed": "unwarmed", "start": "after start", "load": "warm load", "nav": "in-app"}
    kinds = [k for k in columns if any(key[1] == k for key in measured)]
    median = f", median of {repeat}" if repeat > 1 else ""
    print(f"\nseconds to the first meaningful render / to the complete page (fresh tab per load{median})")
    print(f"{'page':22} " + " ".join(f"{columns[k]:>11}" for k in kinds) + "  ok")
    for title in (FLOOR_TITLE, *(p[1] for p in PAGES)):
        visits = {k: _median(measured[(title, k)]) if (title, k) in measured else None for k in kinds}
        ok = all(v[2] for v in visits.values() if v is not None)
        if (title, "once") in measured:
            ok = ok and _median(measured[(title, "once")])[2]
        name = "floor: Streamlit only" if title == FLOOR_TITLE else title
        print(f"{name:22} " + " ".join(f"{shown(visits[k]):>11}" for k in kinds) + f"  {'yes' if ok else 'NO'}")
    print(_load())


def time_after_writer(warehouse: Path, log: Path, repeat: int, base: Path | None) -> None:
    """Each page opened in a fresh tab of a warm server right after a writer committed (`preemptlens cost`,
    as serve's jobs do every few minutes): what the reader meets is the new snapshot, or a copy of the
    warehouse made on its behalf. With `base` (another checkout) its server and its writer run the same,
    on a copy of the warehouse, each page in turn with this checkout's; the floor page is measured in turn."""
    at = datetime.now(UTC).replace(microsecond=0).isoformat()
    roots = [("this", ROOT, warehouse)]
    if base is not None:
        copy = log.parent / "base.duckdb"
        shutil.copy(warehouse, copy)
        roots.append(("base", base.resolve(), copy))
    measured: dict[tuple[str, str], list[Visit]] = {}

    def env(root: Path) -> dict[str, str]:
        return {**{k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}, "PYTHONPATH": str(root)}

    with Chromium() as browser, Floor(log) as floor:
        servers = [(name, root, wh, Dashboard(wh, log, env=env(root))) for name, root, wh in roots]
        try:
            for _, _, _, server in servers:
                for path, title, _, charts in PAGES:
                    browser.fresh_tab()
                    _visit(browser, title, charts, partial(browser.navigate, f"{server.url}/{path}"))
            for _ in range(repeat):
                browser.fresh_tab()
                measured.setdefault((FLOOR_TITLE, "floor"), []).append(
                    _visit(browser, FLOOR_TITLE, 0, partial(browser.navigate, floor.url)))
                for path, title, _, charts in PAGES:
                    for name, root, wh, server in servers:
                        subprocess.run([sys.executable, "-m", "preemptlens.cli", "--warehouse", str(wh), "cost",
                                        "--at", at], env=env(root), check=True, capture_output=True)
                        browser.fresh_tab()
                        measured.setdefault((title, name), []).append(
                            _visit(browser, title, charts, partial(browser.navigate, f"{server.url}/{path}")))
        finally:
            for *_, server in servers:
                server.close()
    names = [name for name, _, _ in roots]
    median = f", median of {repeat}" if repeat > 1 else ""
    print(f"\nseconds to the first meaningful render / to the complete page, right after a writer committed "
          f"(fresh tab, warm server{median})")
    print(f"{'page':22} " + " ".join(f"{name + ' (' + str(root) + ')':>30}" for name, root, _ in roots))
    floor_visit = _median(measured[(FLOOR_TITLE, "floor")])
    print(f"{'floor: Streamlit only':22} {floor_visit[0]:30.2f}")
    for _, title, _, _ in PAGES:
        cells = []
        for name in names:
            first, done, ok = _median(measured[(title, name)])
            cells.append(f"{first or 0:5.2f} {done or 0:5.2f}{'' if ok else ' NOT OK':7}".rjust(30))
        print(f"{title:22} " + " ".join(cells))
    print(_load())


def _cli(folder: Path, *args: str) -> float:
    """One `preemptlens` command in a new process on `folder`'s warehouse, as a user runs it; its wall seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "preemptlens.cli", "--warehouse", str(folder / "w.duckdb"), *args],
                          cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"preemptlens {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - began


def fleet_and_demo(folder: Path, gpus: int, days: float, step: int, suggest: bool) -> tuple[Path, Path]:
    """The demo's warehouse (`preemptlens demo --no-dashboard`: simulate, analyze, suggest) and a fleet's
    (`simulate --gpus N --days D --step S`, then `analyze`, and `suggest` when asked), each built through the
    CLI in a folder of `folder` unless a finished one is there already (a `built` file says so)."""
    demo, fleet = folder / "demo", folder / f"fleet-{gpus}x{days:g}-step{step}"
    steps = {demo: [("demo", "--no-dashboard")],
             fleet: [("simulate", "--gpus", str(gpus), "--days", f"{days:g}", "--step", str(step)),
                     ("analyze", "--quiet"), *([("suggest",)] if suggest else [])]}
    for where, commands in steps.items():
        if (where / "built").exists():
            print(f"{where}: built before ({(where / 'built').read_text().strip()})")
            continue
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(mode=0o700, parents=True)
        took = [f"{args[0]} {_cli(where, *args):.0f} s" for args in commands]
        (where / "built").write_text(", ".join(took) + f"; {_load()}\n")
        print(f"{where}: built, {', '.join(took)}; {_load()}")
    return demo / "w.duckdb", fleet / "w.duckdb"


def _work(warehouse: Path) -> str:
    """What a page reads grows with: jobs, runs, preemptions and GPU samples."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
                  for t in ("jobs", "job_runs", "preemption_ledger", "gpu_samples")}
    finally:
        con.close()
    return ", ".join(f"{n:,} {t}" for t, n in counts.items())


def time_versus_demo(demo: Path, fleet: Path, log: Path, repeat: int, only: list[str] | None = None) -> None:
    """Every page's first meaningful render on the fleet's warehouse beside the demo's and Streamlit's floor
    page, in one run: for each page in turn, the floor, the demo and the fleet each on a newly started
    server at one address (the browser holds the bundles from an untimed visit before), the page in a fresh
    tab (`after start`: its queries run for it), then again in another fresh tab (`warm`: its queries
    cached). The ratio is fleet / demo of the first meaningful render; the load column is the 1-minute load
    average when the page's visits began. `only`: the URL paths of the pages to measure ("" the Overview)."""
    pages = [p for p in PAGES if only is None or p[0] in only]
    port = free_port()
    kinds = ("floor", "demo", "fleet")
    measured: dict[tuple[str, str, str], list[Visit]] = {}
    loads: dict[str, list[float]] = {}
    print(f"\ndemo:  {demo} ({_work(demo)})\nfleet: {fleet} ({_work(fleet)})")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    with Chromium() as browser:
        _visit_untimed(browser, demo, log, port, pages)
        for _ in range(repeat):
            for path, title, _, charts in pages:
                loads.setdefault(title, []).append(os.getloadavg()[0])
                for kind in kinds:
                    server = Floor(log, port) if kind == "floor" else Dashboard(demo if kind == "demo" else fleet,
                                                                                log, port)
                    shown, drawn, url = ((FLOOR_TITLE, 0, server.url) if kind == "floor"
                                         else (title, charts, f"{server.url}/{path}"))
                    with server:
                        for visited in ("start", "warm"):
                            browser.fresh_tab()
                            measured.setdefault((title, kind, visited), []).append(
                                _visit(browser, shown, drawn, partial(browser.navigate, url)))

    def cell(v: Visit) -> str:
        return " ".join(f"{t:5.2f}" if t is not None else "    –" for t in v[:2])

    median = f", median of {repeat}" if repeat > 1 else ""
    print(f"\nseconds to the first meaningful render / to the complete page, each on a new server "
          f"(fresh tab{median}); ratio: fleet / demo of the first render")
    print(f"{'page':22} {'floor':>11} {'demo':>11} {'fleet':>11} {'ratio':>6}   {'warm: demo':>11} {'fleet':>11} "
          f"{'ratio':>6}  {'load':>5}  ok")
    for _, title, _, _ in pages:
        row = {(kind, visited): _median(measured[(title, kind, visited)])
               for kind in kinds for visited in ("start", "warm")}
        ratios = []
        for visited in ("start", "warm"):
            first_demo, first_fleet = row[("demo", visited)][0], row[("fleet", visited)][0]
            ratios.append(f"{first_fleet / first_demo:5.2f}x" if first_demo and first_fleet else "     –")
        ok = all(v[2] for v in row.values())
        print(f"{title:22} {cell(row[('floor', 'start')]):>11} {cell(row[('demo', 'start')]):>11} "
              f"{cell(row[('fleet', 'start')]):>11} {ratios[0]:>6}   {cell(row[('demo', 'warm')]):>11} "
              f"{cell(row[('fleet', 'warm')]):>11} {ratios[1]:>6}  {statistics.mean(loads[title]):5.2f}  "
              f"{'yes' if ok else 'NO'}")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--warehouse", type=Path, help="an analysed warehouse to measure; simulated there first when missing"
    )
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--sample-step", type=int, default=60, help="GPU sampling step of the simulation, seconds")
    parser.add_argument("--repeat", type=int, default=1, help="visits of every page and kind; the median is shown")
    parser.add_argument(
        "--browser-only", action="store_true", help="only the page times in Chromium, not imports, queries, figures"
    )
    parser.add_argument(
        "--after-start", action="store_true", help="only the first page after a server start, not warm or in-app"
    )
    parser.add_argument(
        "--unwarmed", action="store_true", help="also the first page after a plain `streamlit run` (no launcher)"
    )
    parser.add_argument(
        "--cold", action="store_true",
        help="also the first page after a start on a new port: the browser fetches every bundle again",
    )
    parser.add_argument(
        "--after-writer", action="store_true",
        help="only each page right after a writer committed (see time_after_writer), not the other columns",
    )
    parser.add_argument("--base", type=Path, help="with --after-writer: another checkout measured in turn")
    parser.add_argument(
        "--versus-demo", type=Path, metavar="DIR",
        help="only every page on a fleet of --gpus x --days beside the demo's and the floor (see time_versus_demo), "
             "both built through the CLI in DIR unless there already",
    )
    parser.add_argument("--suggest", action="store_true", help="with --versus-demo: run `suggest` on the fleet too")
    parser.add_argument("--pages", help="with --versus-demo: only these URL paths, comma-separated ('' the Overview)")
    args = parser.parse_args()
    if args.versus_demo:
        demo, fleet = fleet_and_demo(args.versus_demo, args.gpus, args.days, args.sample_step, args.suggest)
        only = None if args.pages is None else args.pages.split(",")
        time_versus_demo(demo, fleet, args.versus_demo / "streamlit.log", max(args.repeat, 1), only)
        return
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        warehouse = args.warehouse or Path(tmp) / "w.duckdb"
        if not warehouse.exists():
            build(warehouse, args.gpus, args.days, args.sample_step)
        if args.after_writer:
            time_after_writer(warehouse, Path(tmp) / "streamlit.log", max(args.repeat, 1), args.base)
            return
        if not args.browser_only:
            time_imports(warehouse)
            f = time_queries(warehouse)
            time_figures(warehouse, f)
        time_pages(
            warehouse, Path(tmp) / "streamlit.log", max(args.repeat, 1), args.after_start, args.unwarmed, args.cold
        )


if __name__ == "__main__":
    main()
