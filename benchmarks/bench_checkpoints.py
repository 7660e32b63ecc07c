"""Checkpoint collector: scanning checkpoint directories and training logs, first pass and incremental pass,
side by side with `find` and `grep` over the same tree, measured in the same run.

Builds under --root (default: a temporary directory on /work; everything is deleted after) `--jobs` job
directories holding `--dirs` Hugging Face checkpoint directories in all (checkpoint-<step>/ with a model file
and trainer_state.json) and one training log per job, `--log-gb` GB in all: Megatron-style lines, one
iteration line in every `--every` lines and a checkpoint pair in every 100 of those, the rest noise. Then:

- pass 1: the `files` and `logs` streams read everything (the collector's batches; rows counted), from no
  cursor, `--repeat` times in turn with the peers (medians; every read is from a warm page cache, theirs too);
- new data: `--new-share` of the jobs get one more checkpoint, and `--append-mb` MB are appended to the logs;
- pass 2: the same streams from pass 1's cursors (only what is new is listed or read);
- the peers, the floor of a pass without a cursor, over the whole tree: `find ROOT -name trainer_state.json`
  (the directory walk alone: it stats no file), the honest peer of the files stream `find ROOT -path
  '*/checkpoint-*/*' -type f -printf '%T@ %s %p\n'` (the same walk, stat-ing the files of the checkpoint
  directories, whose times the collector must read for a checkpoint's time and save time), and `grep -c -F
  iteration` (the lines the megatron preset reads all name their iteration).

The jobs are the current user's (a log is read only when it is its job's user's own). `--profile` prints where
pass 1's time goes (cProfile, by own time).

    python benchmarks/bench_checkpoints.py                                # 20,000 directories, 1 GB
    python benchmarks/bench_checkpoints.py --dirs 100000 --log-gb 10      # the issue's larger size

Last measured (2026-12-07, 2 cores shared with six other sessions, load 11-19; pass 1 / peer, wall and CPU):

  20,000 dirs, 1 GB, before (218d0f8): files 0.85 s / find 0.32 s = 2.66x (CPU 0.62 / 0.19 = 3.31x); logs 0.85x grep.
  after (daff41a), load 11.4: files 1.52 s / 0.39 s = 3.88x (CPU 0.59 / 0.20 = 3.00x); logs 0.72x grep (CPU 0.90x).
  100,000 dirs, 10 GB, before, load 16-19: files 37.9 s / find 4.47 s = 8.48x (CPU 5.67 / 1.78 = 3.18x); logs
  68.1 s / grep 58.5 s = 1.16x (0.15 GB/s: the logs did not stay in the page cache beside the other sessions).
  after (daff41a), load 12-17: files 7.32 s / 1.29 s = 5.66x (CPU 2.58 / 0.85 = 3.03x), pass 2 0.29 s; logs
  16.6 s / 16.5 s = 1.01x (CPU 0.85x).
Quiet (2026-12-07 21:10, load 0.3-0.9, 267915f): 20,000 dirs files 0.37 s / find 0.15 s = 2.48x (CPU 2.51x),
logs 0.75x grep; 100,000 dirs, 10 GB files 1.96 s / 0.76 s = 2.58x (CPU 2.55x), logs 3.67 s / 5.52 s = 0.67x.
Beside the honest peer (2026-12-07 23:28-23:39, load 0.9-1.3; medians of 2 runs, each a median of 3; before
132825a, after 8802cf2, run in turn): files stream / find -name, then / find -printf %T@ %s:
  20,000 dirs, 1 GB:    before 2.35x, 2.44x (2.40x) / 1.64x, 1.74x (1.69x); after 2.16x, 2.23x (2.20x) / 1.54x,
                        1.55x (1.55x); after 0.32 s and 0.34 s, find -name 0.15 s, find -printf 0.21-0.22 s.
  100,000 dirs, 10 GB:  before 2.53x, 2.81x (2.67x) / 1.67x, 1.91x (1.79x); after 2.07x, 2.32x (2.20x) / 1.49x,
                        1.63x (1.56x); after 1.51 s and 1.73 s, find -name 0.73-0.75 s, find -printf 1.01-1.06 s.
  logs / grep: before 0.76x, 0.73x and 0.66x, 0.65x; after 0.69x, 0.68x and 0.64x, 0.68x.
The walk is within 2x of the peer doing its work, not of find -name: about 60% of a pass is the listing itself
(os.scandir, its entries and one lstat per file of a checkpoint: system calls and the objects Python makes of
them), which a bare os.scandir walk pays too (about 1.4x find -name), and no one function of the rest holds
more than a few percent (py-spy). strace -c of find -printf on the 20,000-directory tree: 106,028 newfstatat,
40,000 of them the lstat of each file of a checkpoint directory (both files of each), the rest find's own 3 per
directory; the collector lstats the same 40,000 files, fstats each directory it opens and lstats the 3,000 job
and out/ directories it walks into: the peer stats every file the collector does.
At the loads above the wall-clock ratio follows the scheduler more than the code; the CPU seconds say more. strace -c
of one pass over the 20,000-directory tree (22,000 directories): per directory the walk makes 1 openat, 2
getdents64, 1 close and 3 newfstatat (a checkpoint's 2 files, the job's directories); find makes 1 openat, 2
getdents64, 3 newfstatat, 4 close and 5 fcntl. The walk makes no system call find does not: what is left is
the interpreter's work per entry (a bare os.scandir walk that stats every file costs about 1.4x find's CPU).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import pwd
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import polars as pl

from preemptlens.collectors.checkpoints import CheckpointCollector
from preemptlens.config import Config

CLUSTER = "bench"
START = datetime(2026, 9, 1, tzinfo=UTC)
# The jobs' user: the owner of the tree, so that the logs stream reads its logs.
USER = pwd.getpwuid(os.getuid()).pw_name


def build_tree(root: Path, jobs: int, dirs: int) -> None:
    per_job = max(1, dirs // jobs)
    for j in range(jobs):
        job = root / "scratch" / USER / f"{j}"
        for k in range(per_job):
            d = job / "out" / f"checkpoint-{(k + 1) * 100}"
            d.mkdir(parents=True)
            (d / "model.safetensors").write_bytes(b"w")
            (d / "trainer_state.json").write_text("{}")


def log_block(every: int) -> bytes:
    """100 iteration lines, one in every `every` lines, and one checkpoint save (its two lines)."""
    noise = b"2026-09-01 10:00:00,000 [rank0] nccl: all_reduce 4096 elements on stream 7 took 0.21 ms ok\n"
    step = b"[2026-09-01 10:00:01.000000] iteration      100/  100000 | consumed samples: 12800 | loss 2.1 |\n"
    saving = b"[2026-09-01 10:00:02.000000] saving checkpoint at iteration     100 to /ckpt in torch_dist format\n"
    saved = b"  [2026-09-01 10:00:03.000000] successfully saved checkpoint from iteration     100 to /ckpt [ t 1/1 ]\n"
    block = bytearray()
    for i in range(100):
        block += noise * (every - 1) + step
        if i == 99:
            block += saving + saved
    return bytes(block)


def build_logs(root: Path, jobs: int, total_bytes: int, every: int) -> list[Path]:
    logs = root / "logs"
    logs.mkdir()
    block = log_block(every)
    per_file = total_bytes // jobs
    paths = []
    for j in range(jobs):
        path = logs / f"slurm-{j}.out"
        with path.open("wb") as f:
            _write(f, block, per_file)
        paths.append(path)
    return paths


def _write(f: BinaryIO, block: bytes, size: int) -> None:
    """`size` bytes of whole lines of `block`, repeated."""
    for _ in range(size // len(block)):
        f.write(block)
    rest = block[: size % len(block)]
    f.write(rest[: rest.rfind(b"\n") + 1])


def runs(jobs: int, root: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    frame = pl.DataFrame({
        "cluster": [CLUSTER] * jobs, "job_id": [str(j) for j in range(jobs)], "run": [1] * jobs,
        "start_time": [START] * jobs, "end_time": [None] * jobs, "user_name": [USER] * jobs,
        "team": ["t"] * jobs, "name": [f"n{j}" for j in range(jobs)], "work_dir": [None] * jobs,
        "stdout_path": [str(root / "logs" / f"slurm-{j}.out") for j in range(jobs)],
        "stderr_path": [None] * jobs, "source": ["slurm"] * jobs,
    }, schema_overrides={"end_time": pl.Datetime("us", "UTC"), "work_dir": pl.String, "stderr_path": pl.String})
    return frame, pl.DataFrame(schema={"cluster": pl.String, "label": pl.String, "job_id": pl.String})


def collect(root: Path, jobs: int, stream: str, cursor: dict[tuple[str, str], str]) -> tuple[float, int, int, float]:
    """Seconds, rows, quarantined records and CPU seconds of one pass of a stream; `cursor` is updated."""
    settings = {"roots": [{"path": str(root / "scratch" / "{user}" / "{job_id}")}], "log_roots": [str(root / "logs")],
                "layouts": ["hf_trainer"], "log_presets": ["megatron"], "max_read_bytes": 64 << 30}
    collector = CheckpointCollector(Config(values={"checkpoints": settings}), CLUSTER, [stream])
    collector.use_runs(*runs(jobs, root))
    began, cpu = time.perf_counter(), time.process_time()
    rows = rejects = 0
    for batch in collector.batches(cursor):
        rows += batch.frames["checkpoints"].height
        rejects += len(batch.rejects)
        for mark in batch.watermarks:
            cursor[(mark.cluster, mark.stream)] = mark.cursor
    return time.perf_counter() - began, rows, rejects, time.process_time() - cpu


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of a command. Its output goes to a pipe, not /dev/null: GNU grep writing to /dev/null
    stops reading a file at its first match (as -q does), so it would skip nearly all of each log."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def find_argv(root: Path) -> list[str]:
    return ["find", str(root / "scratch"), "-name", "trainer_state.json"]


def find_stat_argv(root: Path) -> list[str]:
    """The files stream's honest peer: the same walk, and every file in a checkpoint directory stat-ed for its time
    and size, as the collector stats them (a checkpoint's time is its newest file's, its save time the span of its
    files' times): strace -c counts the same 40,000 file lstats on the 20,000-directory tree for both."""
    return ["find", str(root / "scratch"), "-path", "*/checkpoint-*/*", "-type", "f", "-printf", "%T@ %s %p\n"]


def grep_argv(paths: list[Path]) -> list[str]:
    """Count the lines naming an iteration: every line the megatron preset reads does."""
    return ["grep", "-c", "-F", "iteration", *map(str, paths)]


def profile(root: Path, jobs: int, stream: str, top: int) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(collect, root, jobs, stream, {})
    print(f"\n-- where pass 1 of the {stream} stream spends its time (cProfile, by own time) --")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dirs", type=int, default=20_000, help="checkpoint directories in all")
    ap.add_argument("--jobs", type=int, default=1000, help="job directories (and logs)")
    ap.add_argument("--log-gb", type=float, default=1.0, help="GB of training logs in all")
    ap.add_argument("--every", type=int, default=1000, help="lines per iteration line")
    ap.add_argument("--new-share", type=float, default=0.01, help="share of jobs with a new checkpoint for pass 2")
    ap.add_argument("--append-mb", type=float, default=100.0, help="MB appended to the logs for pass 2")
    ap.add_argument("--repeat", type=int, default=3, help="pass 1 and its peers, in turn (medians)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="print the N functions pass 1 of each stream spends most time in")
    ap.add_argument("--root", default="/work", help="where the temporary tree is built")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.root))
    try:
        t = time.perf_counter()
        build_tree(root, args.jobs, args.dirs)
        paths = build_logs(root, args.jobs, int(args.log_gb * 1e9), args.every)
        log_bytes = sum(p.stat().st_size for p in paths)
        print(f"tree: {args.dirs:,} checkpoint dirs in {args.jobs:,} jobs, {log_bytes / 1e9:.2f} GB of logs "
              f"(built in {time.perf_counter() - t:.0f} s); load average {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} CPUs")
        if args.profile:
            for stream in ("files", "logs"):
                profile(root, args.jobs, stream, args.profile)
        walls: dict[str, list[float]] = {"files": [], "logs": [], "find": [], "find_stat": [], "grep": []}
        cpus: dict[str, list[float]] = {k: [] for k in walls}
        counts: dict[str, tuple[int, int]] = {}
        for _ in range(args.repeat):
            for stream in ("files", "logs"):
                seconds, rows, rejects, cpu = collect(root, args.jobs, stream, {})
                walls[stream].append(seconds)
                cpus[stream].append(cpu)
                counts[stream] = (rows, rejects)
            for peer, argv in (("find", find_argv(root)), ("find_stat", find_stat_argv(root)),
                               ("grep", grep_argv(paths))):
                seconds, cpu = timed(argv)
                walls[peer].append(seconds)
                cpus[peer].append(cpu)
        if not all(rows for rows, _ in counts.values()):
            raise SystemExit(f"a stream found nothing (rows, quarantined: {counts}): the comparison would be empty")
        wall = {k: statistics.median(v) for k, v in walls.items()}
        cpu_s = {k: statistics.median(v) for k, v in cpus.items()}
        f1, l1 = wall["files"], wall["logs"]
        load_1 = os.getloadavg()[0]
        cursor: dict[tuple[str, str], str] = {}
        collect(root, args.jobs, "files", cursor)
        collect(root, args.jobs, "logs", cursor)
        # New data: a checkpoint in a share of the jobs, lines appended to the logs.
        new_jobs = max(1, int(args.jobs * args.new_share))
        for j in range(new_jobs):
            d = root / "scratch" / USER / f"{j}" / "out" / "checkpoint-99999900"
            d.mkdir()
            (d / "trainer_state.json").write_text("{}")
        per_file = int(args.append_mb * 1e6 / len(paths))
        chunk = log_block(args.every)
        for p in paths:
            with p.open("ab") as f:
                _write(f, chunk, per_file)
        appended = sum(p.stat().st_size for p in paths) - log_bytes
        f2 = collect(root, args.jobs, "files", cursor)
        l2 = collect(root, args.jobs, "logs", cursor)
        find2_s = timed(find_argv(root))[0]
        find_stat2_s = timed(find_stat_argv(root))[0]
        grep2_s = timed(grep_argv(paths))[0]
        print()
        print(f"{'':34} {'pass 1':>10} {'pass 2':>10}   {'peer, full tree':>22} {'pass 1':>8} {'pass 2':>8}"
              f"   {'pass 1 / peer':>13}")
        print(f"{'files stream (s)':34} {f1:10.2f} {f2[0]:10.2f}   {'find -name':>22} {wall['find']:8.2f} "
              f"{find2_s:8.2f}   {f1 / wall['find']:12.2f}x")
        print(f"{'  CPU s':34} {cpu_s['files']:10.2f} {'':10}   {'':22} {cpu_s['find']:8.2f} {'':8}"
              f"   {cpu_s['files'] / max(cpu_s['find'], 1e-3):12.2f}x")
        print(f"{'files stream (s)':34} {f1:10.2f} {f2[0]:10.2f}   {'find -printf %T@ %s':>22} "
              f"{wall['find_stat']:8.2f} {find_stat2_s:8.2f}   {f1 / wall['find_stat']:12.2f}x")
        print(f"{'  CPU s':34} {cpu_s['files']:10.2f} {'':10}   {'':22} {cpu_s['find_stat']:8.2f} {'':8}"
              f"   {cpu_s['files'] / max(cpu_s['find_stat'], 1e-3):12.2f}x")
        print(f"{'  checkpoints found, quarantined':34} {counts['files'][0]:10,} {f2[1]:10,}   "
              f"{counts['files'][1]:,} and {f2[2]:,} quarantined")
        print(f"{'logs stream (s)':34} {l1:10.2f} {l2[0]:10.2f}   {'grep -c -F':>22} {wall['grep']:8.2f} "
              f"{grep2_s:8.2f}   {l1 / wall['grep']:12.2f}x")
        print(f"{'  CPU s':34} {cpu_s['logs']:10.2f} {'':10}   {'':22} {cpu_s['grep']:8.2f} {'':8}"
              f"   {cpu_s['logs'] / max(cpu_s['grep'], 1e-3):12.2f}x")
        print(f"{'  rows (checkpoint + progress)':34} {counts['logs'][0]:10,} {l2[1]:10,}   "
              f"{counts['logs'][1]:,} and {l2[2]:,} quarantined")
        print(f"{'  GB/s read':34} {log_bytes / 1e9 / l1:10.2f} {appended / 1e9 / max(l2[0], 1e-9):10.2f}"
              f"   {'grep GB/s':>22} {log_bytes / 1e9 / wall['grep']:8.2f} "
              f"{(log_bytes + appended) / 1e9 / grep2_s:8.2f}")
        print(f"{'  new bytes in pass 2':34} {'':10} {appended / 1e6:9.0f}M")
        print("(find -name: the walk alone, matching one name, no file stat-ed: the floor of listing the tree;\n"
              " find -printf %T@ %s: the same walk stat-ing every file of a checkpoint-* directory, as the collector "
              "must for a checkpoint's time and save time: the peer doing the collector's work;\n"
              " grep -c -F: every log read whole, counting the lines naming an iteration)")
        print(f"(pass 1 and its peers: medians of {args.repeat} in turn, every read from a warm page cache; pass 2: "
              f"{new_jobs} new checkpoint dir(s), the peers re-read the whole tree; load average "
              f"{load_1:.1f} after pass 1, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
