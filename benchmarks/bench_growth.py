"""Does every command grow in step with the cluster? The same chain at several sizes, each figure's growth per
4x of GPUs printed beside the work's (issue 35, item 1).

    python benchmarks/bench_growth.py                                # 1,024, 4,096 and 16,384 GPUs x 30 days
    python benchmarks/bench_growth.py --gpus 256 1024 4096 --days 7  # smaller, on a busy 2-core machine
    python benchmarks/bench_growth.py --gpus 1024 4096 --days 14 --no-pages --keep /tmp/growth

For each size, in a folder of its own, as a user runs them (every command a new process, `python -m
preemptlens.cli`, with no configuration file):
  - `simulate --gpus N --days D` (set-up; its time is shown, not judged),
  - `analyze` (a full one: the ledger, hoarding, views and the counterfactual's replays),
  - `analyze` again, nothing changed,
  - `analyze` after one more day: a day of jobs and samples appended after the window (simulated in this
    process on the same cluster, seed + 1, its job ids prefixed `d+1-` so that they are new jobs; the day
    starts on an empty cluster, so it is a lighter day than the window's),
  - `suggest` (the replayed what-ifs), `cost`, `report`,
  - the first meaningful render of the Overview and the Preemptions page in headless Chromium, each from a
    newly started `preemptlens dashboard` (the suite's CDP driver, tests/dashboards/browser.py; --no-pages
    leaves them out).
Each command's wall seconds, its CPU seconds (its own and its reaped children's: the replays' worker
processes) and the peak resident memory of its largest process (GNU time's %M: one process, the worker
pool's processes are not summed) are printed per size; then, between consecutive sizes, every figure's
growth scaled to 4x the GPUs ((b / a) ** (log 4 / log(GPUs b / GPUs a))) beside the work's: jobs, runs
and GPU samples. A command in step with the work grows about as the jobs do; the square of the work grows
16x per 4x. One run, no repeats (a 16,384-GPU window takes long enough): say which machine and load the
figures came from; the load average is printed at each step.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "fleet"
# The chain, in order: name, arguments (None: not a CLI command).
STEPS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("simulate", None),
    ("analyze", ("analyze", "--quiet")),
    ("analyze unchanged", ("analyze", "--quiet")),
    ("analyze +1 day", ("analyze", "--quiet")),
    ("suggest", ("suggest",)),
    ("cost", ("cost",)),
    ("report", ("report",)),
)
PAGES = (("", "Preemption overview", 1), ("preemptions", "Preemptions", 3))


@dataclasses.dataclass
class Measure:
    wall: float
    cpu: float
    peak_mib: float


@dataclasses.dataclass
class Size:
    gpus: int
    work: dict[str, int] = dataclasses.field(default_factory=dict)
    measures: dict[str, Measure] = dataclasses.field(default_factory=dict)
    pages: dict[str, float | None] = dataclasses.field(default_factory=dict)


def _load() -> str:
    return "load average " + " ".join(f"{v:.1f}" for v in os.getloadavg())


def env() -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
    found["PYTHONPATH"] = str(ROOT)
    return found


class CommandFailed(Exception):
    """A command of the chain exited with an error: its figure is missing, the others are still measured."""


def run(folder: Path, *args: str) -> Measure:
    """One CLI command in a new process: wall and CPU seconds, and its largest process's peak RSS.

    The command runs under GNU time, which reports the peak: a process started from this one directly would
    report this process's own peak when it is larger (Linux carries it over the fork and the exec).
    """
    peak = folder / "peak.txt"
    argv = ["/usr/bin/time", "-f", "%M", "-o", str(peak),
            sys.executable, "-m", "preemptlens.cli", "--warehouse", str(folder / "w.duckdb"), *args]
    began = time.perf_counter()
    child = subprocess.Popen(argv, cwd=folder, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise CommandFailed(f"{' '.join(args)} failed ({code}):\n{err.decode()[-3000:]}")
    return Measure(wall, usage.ru_utime + usage.ru_stime, int(peak.read_text().split()[-1]) / 1024)



def work(folder: Path) -> dict[str, int]:
    """What the commands work on: jobs, runs and GPU samples in the warehouse."""
    con = duckdb.connect(str(folder / "w.duckdb"), read_only=True)
    try:
        return {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0])
                for t in ("jobs", "job_runs", "gpu_samples")}
    finally:
        con.close()


def one_more_day(folder: Path, gpus: int, start: datetime, days: int, seed: int) -> None:
    """A day of new jobs and their samples after the window, loaded as a collector would load them."""
    from preemptlens.analytics.simulator import SimConfig, Simulation, cluster_of
    from preemptlens.analytics.simulator.engine import simulate_jobs
    from preemptlens.analytics.simulator.workload import generate_jobs
    from preemptlens.warehouse import Warehouse

    base = SimConfig()
    sim = SimConfig(cluster=CLUSTER, start=start + timedelta(days=days), days=1.0, pools=cluster_of(gpus),
                    workload=dataclasses.replace(base.workload, seed=seed + 1))
    jobs = [dataclasses.replace(j, job_id=f"d+1-{j.job_id}") for j in generate_jobs(sim)]
    outcome = simulate_jobs(jobs, sim.pools, sim.policy, sim.horizon_s, grid_s=sim.sample_step_s)
    with Warehouse(folder / "w.duckdb") as wh:
        for batch in Simulation(sim, jobs, outcome).batches():
            wh.load_batch(batch)


def first_renders(folder: Path) -> dict[str, float | None]:
    """Seconds to each page's first meaningful render, each from a newly started dashboard (after one untimed
    visit fills the browser's cache of Streamlit's and plotly's bundles, as bench_dashboard's `after start`)."""
    sys.path.insert(0, str(ROOT / "tests" / "dashboards"))
    from browser import Chromium, Dashboard, free_port  # the test suite's CDP driver

    class Patient(Dashboard):
        """The suite's dashboard, given more than its 60 s to answer: a loaded machine takes longer."""

        def serve(self, argv: list[str], log: Path, env: dict[str, str] | None = None,
                  host: str = "127.0.0.1") -> None:
            self.url = f"http://{host}:{self.port}"
            self.start(argv, log, f"{self.url}/_stcore/health", 600, env)

    warehouse, log = folder / "w.duckdb", folder / "dashboard.log"
    port = free_port()
    found: dict[str, float | None] = {}
    with Chromium() as browser:
        for timed in (False, True):
            for path, title, charts in PAGES:
                with Patient(warehouse, log, port, env=env()) as dashboard:
                    browser.fresh_tab()
                    began = time.monotonic()
                    browser.navigate(f"{dashboard.url}/{path}")
                    state, first, _ = browser.wait_page(began, timeout_s=600, title=title, charts=charts)
                    if state.exceptions or state.errors:
                        raise SystemExit(f"page {title!r} failed: {state.exceptions or state.errors}")
                    if timed:
                        found[title] = first
    return found


def measure(top: Path, gpus: int, days: int, seed: int, pools: int, pages: bool, steps: Sequence[str]) -> Size:
    folder = top / f"{gpus}gpus"
    folder.mkdir(mode=0o700)
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=1)
    start = end - timedelta(days=days)
    size = Size(gpus)
    for name, args in STEPS:
        if name not in steps:
            continue
        if name == "simulate":
            args = ("simulate", "--cluster", CLUSTER, "--gpus", str(gpus), "--pools", str(pools),
                    "--days", str(days), "--seed", str(seed), "--start", start.strftime("%Y-%m-%dT%H:%M:%SZ"))
        if name == "analyze +1 day":
            one_more_day(folder, gpus, start, days, seed)
        assert args is not None
        try:
            size.measures[name] = m = run(folder, *args)
        except CommandFailed as exc:
            if name == "simulate":
                raise SystemExit(str(exc)) from None
            # A command that fails is a figure missing, not the other commands' figures lost.
            print(f"  {gpus:>6} GPUs  {name:18} {exc}", flush=True)
            continue
        if name == "simulate":
            size.work = work(folder)
        print(f"  {gpus:>6} GPUs  {name:18} {m.wall:8.1f} s  cpu {m.cpu:8.1f} s  peak {m.peak_mib:7,.0f} MiB  "
              f"{_load()}", flush=True)
    if pages:
        try:
            size.pages = first_renders(folder)
        except (TimeoutError, OSError, SystemExit) as exc:
            # A page that does not come is a figure missing, not the other sizes' figures lost.
            print(f"  {gpus:>6} GPUs  first renders failed: {exc}", flush=True)
        for title, first in size.pages.items():
            shown = "-" if first is None else f"{first:8.2f} s"
            print(f"  {gpus:>6} GPUs  first render {title}: {shown}  {_load()}", flush=True)
    return size


def per_4x(a: float | None, b: float | None, gpus_a: int, gpus_b: int) -> str:
    if a is None or b is None or a <= 0 or b <= 0:
        return "-"
    return f"{(b / a) ** (math.log(4) / math.log(gpus_b / gpus_a)):.1f}x"


def table(sizes: list[Size]) -> None:
    names = [name for name, _ in STEPS if any(name in s.measures for s in sizes)]
    pages = [t for _, t, _ in PAGES if any(t in s.pages for s in sizes)]
    print(f"\n{'figure':34}" + "".join(f"{s.gpus:>10,} GPUs" for s in sizes)
          + "".join(f"  {'per 4x ' + f'{a.gpus}->{b.gpus}':>20}" for a, b in itertools.pairwise(sizes)))

    def row(label: str, values: list[float | None], fmt: str) -> None:
        cells = "".join(f"{'-' if v is None else format(v, fmt):>15}" for v in values)
        growth = "".join(f"  {per_4x(a, b, sa.gpus, sb.gpus):>20}"
                         for (a, sa), (b, sb) in itertools.pairwise(zip(values, sizes, strict=True)))
        print(f"{label:34}{cells}{growth}")

    print("the work")
    for key, label in (("jobs", "jobs"), ("job_runs", "runs"), ("gpu_samples", "GPU samples")):
        row(f"  {label}", [s.work.get(key) for s in sizes], ",")
    def of(s: Size, name: str, figure: str) -> float | None:
        found = s.measures.get(name)
        return None if found is None else float(getattr(found, figure))

    print("wall seconds")
    for name in names:
        row(f"  {name}", [of(s, name, "wall") for s in sizes], ".1f")
    for title in pages:
        row(f"  first render: {title}", [s.pages.get(title) for s in sizes], ".2f")
    print("CPU seconds (with the worker processes)")
    for name in names:
        row(f"  {name}", [of(s, name, "cpu") for s in sizes], ".1f")
    print("peak RSS of the largest process, MiB")
    for name in names:
        row(f"  {name}", [of(s, name, "peak_mib") for s in sizes], ",.0f")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, nargs="+", default=[1024, 4096, 16384], help="cluster sizes, GPUs")
    parser.add_argument("--days", type=int, default=30, help="simulated days before the extra one")
    parser.add_argument("--pools", type=int, default=1, help="pools the nodes are split into (simulate --pools)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-pages", action="store_true", help="leave out the dashboard's first renders")
    parser.add_argument("--keep", type=Path, help="build the warehouses in this (new) folder and keep them")
    parser.add_argument("--steps", nargs="+", choices=[name for name, _ in STEPS[1:]],
                        default=[name for name, _ in STEPS[1:]],
                        help="run only these commands after simulate, in the chain's order (default: all)")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(mode=0o700, parents=True)
        top = args.keep
    else:
        top = Path(tempfile.mkdtemp(prefix="bench-growth-"))
    print(f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
          f"{_load()}; sizes {', '.join(map(str, args.gpus))} GPUs x {args.days} days, {args.pools} pool(s)")
    try:
        steps = ["simulate", *args.steps]
        sizes = [measure(top, g, args.days, args.seed, args.pools, not args.no_pages, steps)
                 for g in sorted(args.gpus)]
        table(sizes)
        print(_load())
    finally:
        if not args.keep:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
