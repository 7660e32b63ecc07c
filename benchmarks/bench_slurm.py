"""Slurm JSON parsing and loading rate, and peak memory.

Writes a sacct --json document of N jobs in the 23.11 shape (data_parser
v0.0.40: state lists, number objects; about one record in five a requeued
run of the job before it), then reads it with the collector's streaming
parser and loads jobs and job_runs into a fresh DuckDB warehouse, timing each
stage in wall and CPU time. Targets: at least 50,000 jobs/s for parse + rows +
load_batch, peak RSS under 1 GiB. Opening the warehouse and publishing its
snapshot on close are reported apart: they are the warehouse's costs,
whatever the source.

    python benchmarks/bench_slurm.py [--jobs 200000] [--keep DIR] [--document FILE]

The document is read as the collector reads a file or sacct's pipe: as
bytes, streamed in 1 MiB chunks.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Imported by the first load otherwise: a once-per-process cost, not the load's.
import pyarrow  # noqa: F401

# This checkout's code, whatever an editable install elsewhere points at.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from preemptlens.collectors.slurm import build_batch, read_document
from preemptlens.collectors.slurm.policy import Partition, Policy
from preemptlens.warehouse import Warehouse, snapshot_path


def _num(n: int, unset: bool = False) -> dict[str, Any]:
    return {"set": not unset, "infinite": False, "number": 0 if unset else n}


def _job(i: int, job_id: int, run: int, t0: int) -> dict[str, Any]:
    submit = t0 + i * 3
    start = submit + 30
    end = start + 600
    preempted = run == 1 and i % 5 == 0
    gpus = 1 << (i % 4)
    tres = [{"type": "cpu", "name": "", "id": 1, "count": 8}, {"type": "mem", "name": "", "id": 2, "count": 64000},
            {"type": "energy", "name": "", "id": 3, "count": -2}, {"type": "node", "name": "", "id": 4, "count": 1},
            {"type": "billing", "name": "", "id": 5, "count": 8}, {"type": "gres", "name": "gpu", "id": 1001,
                                                                   "count": gpus}]
    return {
        "account": f"team{i % 40}", "comment": {"administrator": "", "job": "", "system": ""},
        "allocation_nodes": 1,
        "array": {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task_id": _num(0, True), "task": ""},
        "association": {"account": f"team{i % 40}", "cluster": "bench", "partition": "", "user": f"user{i % 500}"},
        "block": "", "cluster": "bench", "constraints": "", "container": "",
        "derived_exit_code": {"status": ["SUCCESS"], "return_code": _num(0), "signal": {"id": _num(0, True),
                                                                                        "name": ""}},
        "time": {"elapsed": 600, "eligible": submit + (11 if run > 1 else 0), "end": end, "planned": _num(30),
                 "start": start, "submission": submit, "suspended": 0, "system": {"seconds": 1, "microseconds": 0},
                 "limit": _num(1440), "total": {"seconds": 5, "microseconds": 0},
                 "user": {"seconds": 4, "microseconds": 0}},
        "exit_code": {"status": ["SUCCESS"], "return_code": _num(0), "signal": {"id": _num(0, True), "name": ""}},
        "extra": "", "failed_node": "", "flags": ["STARTED_ON_SCHEDULE"], "group": "users",
        "het": {"job_id": 0, "job_offset": _num(0, True)}, "job_id": job_id, "name": f"train-{job_id}",
        "licenses": "", "mcs": {"label": ""}, "nodes": f"gpu{i % 64:03d}",
        "partition": "low" if i % 3 else "high", "priority": _num(1000 + i % 100), "qos": "normal",
        "required": {"CPUs": 8, "memory_per_cpu": _num(0, True), "memory_per_node": _num(64000)},
        "kill_request_user": "", "reservation": {"id": 0, "name": ""}, "script": "",
        "state": {"current": ["PREEMPTED"] if preempted else ["COMPLETED"], "reason": "None"},
        "steps": [], "submit_line": f"sbatch train.sh {job_id}",
        "tres": {"allocated": tres, "requested": tres}, "used_gres": "", "user": f"user{i % 500}",
        "wckey": {"wckey": "", "flags": []}, "working_directory": f"/home/user{i % 500}",
    }


def first_submit(jobs: int) -> int:
    """Where a document's submissions start: far enough back that the last
    (3 s apart, at most 1.2 records a job) is not in the future, which the
    warehouse quarantines; on a day boundary, so a day's documents are alike."""
    return (int(time.time()) - 4 * jobs - 86400) // 86400 * 86400


def generate(path: Path, jobs: int, t0: int | None = None) -> int:
    """Write the document one record at a time; return the number of records."""
    t0 = first_submit(jobs) if t0 is None else t0
    meta = {"plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.40",
                       "accounting_storage": "accounting_storage/slurmdbd"},
            "slurm": {"version": {"major": "23", "micro": "4", "minor": "11"}, "release": "23.11.4",
                      "cluster": "bench"}}
    records = 0
    with path.open("w") as out:
        out.write('{\n  "jobs": [\n')
        job_id = 1000
        i = 0
        for _ in range(jobs):
            runs = 2 if i % 5 == 0 else 1
            for run in range(1, runs + 1):
                if records:
                    out.write(",\n")
                out.write(json.dumps(_job(i + run - 1, job_id, run, t0), indent=2))
                records += 1
            job_id += 1
            i += runs
        out.write("\n  ],\n")
        out.write(f'  "meta": {json.dumps(meta)},\n  "errors": [],\n  "warnings": []\n}}\n')
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000, help="jobs in the document (one in five has two runs)")
    parser.add_argument("--keep", help="directory to keep the document and warehouse in")
    parser.add_argument("--document", help="read this document (one an earlier run kept, made with the "
                        "same --jobs) instead of writing a new one")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.document:
        doc = Path(args.document)
        records = -1
    else:
        doc = work / "sacct.json"
        records = generate(doc, args.jobs)
    gen_s = time.perf_counter() - started
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    policy = Policy(preempt_type="partition_prio", global_mode="REQUEUE",
                    partitions={"low": Partition("low", 1, "REQUEUE"), "high": Partition("high", 10, "OFF")})
    warehouse = work / "bench.duckdb"
    warehouse.unlink(missing_ok=True)  # a kept warehouse would turn the load into "unchanged" checks
    snapshot_path(warehouse).unlink(missing_ok=True)

    load_before = os.getloadavg()[0]
    # Wall time and CPU time (all threads) per stage: on a shared machine the
    # CPU time is what the code costs, the wall time what it got.
    clock = [(time.perf_counter(), time.process_time())]
    stages: dict[str, tuple[float, float]] = {}

    def stage(name: str) -> None:
        clock.append((time.perf_counter(), time.process_time()))
        (w0, c0), (w1, c1) = clock[-2], clock[-1]
        stages[name] = (w1 - w0, c1 - c0)

    with doc.open("rb") as stream:
        read = read_document(stream, "json", doc.name)
    stage("parse")
    batch = build_batch("bench", read, policy)
    stage("rows")
    wh = Warehouse(warehouse)
    stage("open + migrate")
    report = wh.load_batch(batch)
    stage("load_batch")
    wh.close()  # publishes the snapshot readers open
    stage("close (publish)")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load_after = os.getloadavg()[0]
    assert report.quarantined == 0, "the generated document is valid: nothing may be quarantined"
    jobs = args.jobs
    made = f"{records} records (generated in {gen_s:.1f} s)" if records >= 0 else f"read from {doc}"
    print(f"document        {doc.stat().st_size / 2**20:10.1f} MiB, {jobs} jobs, {made}")
    print(f"{'stage':16s}{'wall s':>8s}{'jobs/s':>12s}{'cpu s':>9s}{'jobs/s':>12s}")

    def line(name: str, wall: float, cpu: float, note: str = "") -> None:
        print(f"{name:16s}{wall:8.2f}{jobs / wall:12,.0f}{cpu:9.2f}{jobs / cpu:12,.0f}{note}")

    for name, (wall, cpu) in stages.items():
        line(name, wall, cpu)
    core = [stages[n] for n in ("parse", "rows", "load_batch")]
    line("parse + load", sum(w for w, _ in core), sum(c for _, c in core), "   (target >= 50,000)")
    line("all stages", sum(w for w, _ in stages.values()), sum(c for _, c in stages.values()))
    print(f"peak RSS        {peak_mib:10.0f} MiB (before reading: {rss_before / 1024:.0f} MiB) (target < 1024)")
    print(f"loaded          {report.loaded} rows, quarantined {report.quarantined}")
    # On a shared machine the wall figures mean little without it.
    print(f"load average    {load_before:.2f} before reading, {load_after:.2f} after closing ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
