"""Each command's own time, as a user runs it, beside its floor (and beside another checkout, in the same run).

    python benchmarks/bench_commands.py                              # the demo's cluster (256 GPUs x 21 days)
    python benchmarks/bench_commands.py --gpus 512 --days 30 --repeat 7
    python benchmarks/bench_commands.py --base /tmp/base             # also from another checkout, turn about

Every command is a new process (`python -m preemptlens.cli ...`), started with Python's bytecode cache on
(in a private folder) as an installed package has it, its output thrown away. The floors, measured in turn
with the commands:
  - `python`: the interpreter starts and imports preemptlens;
  - `+ query`: that, plus DuckDB opening the warehouse's snapshot and answering SELECT 1;
no command that reads the warehouse can be quicker than the second.

Set-up: a simulated cluster of the demo's shape ending at the start of this ISO week (so that the weekly
report's default week has data), analyzed, with a live cost computed. The commands, in this order in every
round: `--help`, `sql --list`, `sql "SELECT 1"`, `sql --query top_victims`, `analyze` (nothing changed since
the last one), `report` right after a writer (`cost`, not timed: the first report a user meets after a
collection), `report` again, `cost`, `pilot` (the candidates), `act` (no action enabled).

With --base DIR (another checkout, e.g. `mkdir /tmp/base && git archive <commit> | tar -x -C /tmp/base`),
every command also runs from there on its own copy of the warehouse, alternately with this checkout (A B A B
...), so both see the same machine. Medians of --repeat rounds; wall seconds (min-max) and CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name, arguments, an untimed command run just before
COMMANDS: tuple[tuple[str, tuple[str, ...], tuple[str, ...] | None], ...] = (
    ("--help", ("--help",), None),
    ("sql --list", ("sql", "--list"), None),
    ("sql SELECT 1", ("sql", "SELECT 1"), None),
    ("sql --query top_victims", ("sql", "--query", "top_victims"), None),
    ("analyze (unchanged)", ("analyze", "--quiet"), None),
    ("report (after a writer)", ("report",), ("cost",)),
    ("report (again)", ("report",), None),
    ("cost", ("cost",), None),
    ("pilot", ("pilot",), None),
    ("act", ("act",), None),
)


@dataclasses.dataclass
class Variant:
    name: str
    root: Path
    folder: Path

    @property
    def warehouse(self) -> Path:
        return self.folder / "w.duckdb"

    def env(self, cache: Path) -> dict[str, str]:
        # No configuration: the folder holds no preemptlens.toml.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PREEMPTLENS_CONFIG")}
        env.update(PYTHONPATH=str(self.root), PYTHONPYCACHEPREFIX=str(cache / self.name))
        return env


@dataclasses.dataclass
class Timing:
    wall: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)

    def shown(self) -> str:
        if not self.wall:
            return "-"
        return (f"{statistics.median(self.wall):6.2f} s ({min(self.wall):.2f}-{max(self.wall):.2f}) "
                f"cpu {statistics.median(self.cpu):5.2f} s")

    @property
    def median(self) -> float:
        return statistics.median(self.wall)


def run(argv: Sequence[str], variant: Variant, cache: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one process (CPU: its own and its reaped children's)."""
    began = time.perf_counter()
    child = subprocess.Popen(list(argv), cwd=variant.folder, env=variant.env(cache),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{variant.name}: {' '.join(argv)} failed ({child.returncode}):\n{err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def cli(variant: Variant, *args: str) -> list[str]:
    return [sys.executable, "-m", "preemptlens.cli", "--warehouse", str(variant.warehouse), *args]


def floors(variant: Variant) -> dict[str, list[str]]:
    snapshot = f"{variant.warehouse}.snapshot"
    return {
        "floor: python": [sys.executable, "-c", "import preemptlens"],
        "floor: + query": [sys.executable, "-c", "import preemptlens, duckdb; "
                           f"duckdb.connect({snapshot!r}, read_only=True).execute('SELECT 1').fetchall()"],
    }


def build(path: Path, gpus: int, days: int) -> None:
    from preemptlens.analytics.livecost import LiveCostSettings, compute
    from preemptlens.analytics.params import AnalyticsSettings
    from preemptlens.analytics.refresh import analyze
    from preemptlens.analytics.simulator import DEMO, PoolSpec, simulate_into
    from preemptlens.warehouse import Warehouse

    today = datetime.now(UTC).date()
    week = datetime(today.year, today.month, today.day, tzinfo=UTC) - timedelta(days=today.weekday())
    sim = dataclasses.replace(DEMO, start=week - timedelta(days=days), days=float(days),
                              pools=(PoolSpec("a100", nodes=max(1, gpus // 8)),))
    with Warehouse(path) as wh:
        simulate_into(wh, sim)
        analyze(wh, AnalyticsSettings())
        compute(wh, week, LiveCostSettings())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=int, default=21)
    parser.add_argument("--repeat", type=int, default=5, help="rounds; medians are shown")
    parser.add_argument("--base", type=Path, help="another checkout to run every command from, in turn")
    parser.add_argument("--only", action="append", default=[], help="only the commands whose name starts so")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-commands-") as folder:
        top = Path(folder)
        variants = [Variant("this", ROOT, top / "this")]
        if args.base:
            variants.append(Variant("base", args.base.resolve(), top / "base"))
        for v in variants:
            v.folder.mkdir()
        began = time.perf_counter()
        build(variants[0].warehouse, args.gpus, args.days)
        for v in variants[1:]:
            shutil.copy(variants[0].warehouse, v.warehouse)
            shutil.copy(f"{variants[0].warehouse}.snapshot", f"{v.warehouse}.snapshot")
        print(f"set-up: {args.gpus} GPUs x {args.days} days simulated and analyzed in "
              f"{time.perf_counter() - began:.0f} s; {os.path.getsize(variants[0].warehouse) / 2**20:.0f} MiB")
        cache = top / "pycache"
        wanted = [c for c in COMMANDS if not args.only or any(c[0].startswith(o) for o in args.only)]
        names = [*floors(variants[0]), *(c[0] for c in wanted)]
        timings = {(v.name, n): Timing() for v in variants for n in names}
        # One untimed round fills the bytecode caches and the page cache.
        for rnd in range(args.repeat + 1):
            for v in variants:
                for name, argv in floors(v).items():
                    wall, cpu = run(argv, v, cache)
                    if rnd:
                        timings[(v.name, name)].wall.append(wall)
                        timings[(v.name, name)].cpu.append(cpu)
            for name, argv, before in wanted:
                for v in variants:
                    if before:
                        run(cli(v, *before), v, cache)
                    wall, cpu = run(cli(v, *argv), v, cache)
                    if rnd:
                        timings[(v.name, name)].wall.append(wall)
                        timings[(v.name, name)].cpu.append(cpu)
        floor = {v.name: timings[(v.name, "floor: + query")].median for v in variants}
        width = max(len(n) for n in names)
        head = f"{'command':{width}}  " + "  ".join(f"{v.name + ' (wall median, min-max, cpu)':44} x floor"
                                                    for v in variants)
        print(head)
        for name in names:
            cells = []
            for v in variants:
                t = timings[(v.name, name)]
                cells.append(f"{t.shown():44} {t.median / floor[v.name]:5.1f}")
            print(f"{name:{width}}  " + "  ".join(cells))
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
