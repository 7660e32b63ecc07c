"""A seeded workload of training-like jobs played on the real Slurm, for the replay to reproduce (issue 26).

Low-partition jobs train: a start-up (loading), then one step a second, a
checkpoint every few steps (its step number to a state file, and a
`checkpoints` row); a requeued run reloads for the same start-up and resumes
from the state file's step. Every step also writes a `progress` row. High-
partition jobs serve: a short start-up and a few seconds of steps, no
checkpoint. Rows go to JSONL files in the contract's columns, loaded with
`preemptlens import`, as a user of a real cluster would.

Submissions follow the plan's offsets from the play's start (seeded), so two
plays of one plan on one Slurm are the same workload under whatever policy
the cluster has then (`SlurmCluster.set_policy`).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from slurm_harness import CLUSTER, SlurmCluster, wait_until

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator.engine import Outcome
from preemptlens.analytics.whatif.replay import Window, Workload, observed_figures, outcome_figures
from preemptlens.collectors.files import FileImporter
from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.warehouse import Warehouse

# The job script. The run number the contract uses is Slurm's restart count + 1; the step a run resumes from is
# the last one its job checkpointed. `sleep & wait` lets the TERM trap run at once.
_JOB = r"""#!/bin/bash
run=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
id=$SLURM_JOB_ID
state={dir}/$id.step
trap 'exit 143' TERM
step=$(cat "$state" 2>/dev/null || echo 0)
sleep {startup} & wait $!
while [ "$step" -lt {steps} ]; do
  sleep 1 & wait $!
  step=$(( step + 1 ))
  row="\"cluster\":\"{cluster}\",\"job_id\":\"$id\",\"run\":$run,\"time\":$(date +%s.%N),\"step\":$step"
  if [ {every} -gt 0 ] && [ $(( step % {every} )) -eq 0 ]; then
    echo "$step" > "$state.new" && mv "$state.new" "$state"
    echo "{{$row,\"kind\":\"checkpoint\"}}" >> {dir}/checkpoints.jsonl
  fi
  echo "{{$row,\"kind\":\"progress\"}}" >> {dir}/checkpoints.jsonl
done
"""


@dataclass(frozen=True)
class Planned:
    name: str
    partition: str
    gpus: int
    steps: int
    every: int  # checkpoint every this many steps; 0: never
    startup_s: float
    at_s: float  # submission, seconds after the play's start

    @property
    def limit_min(self) -> int:
        """A time limit (whole minutes, as Slurm keeps it) that a run never reaches: its start-up and steps
        with room to spare (a requeued run restarts with the same limit)."""
        return math.ceil((self.startup_s + self.steps + 20) / 60)


def plan(seed: int, low: int, high: int, span_s: float, steps: tuple[int, int] = (30, 75)) -> list[Planned]:
    """`low` training jobs of `steps` steps (the first few at once, to fill the GPUs) and `high` serving jobs
    over `span_s`."""
    rng = random.Random(seed)
    jobs = []
    filling = min(low, 5)
    for i in range(low):
        at = 0.0 if i < filling else round(rng.uniform(5.0, span_s))
        jobs.append(Planned(f"train-{i}", "low", rng.choice((1, 1, 2, 2, 4)), rng.randint(*steps),
                            10, 3.0, at))
    for i in range(high):
        at = round(rng.uniform(8.0, span_s))
        jobs.append(Planned(f"serve-{i}", "high", rng.choice((2, 4, 4, 8)), rng.randint(8, 20), 0, 1.0, at))
    return sorted(jobs, key=lambda j: (j.at_s, j.name))


@dataclass
class Played:
    dir: Path
    started: datetime
    ended: datetime
    ids: dict[str, str]  # planned name -> Slurm job id


def play(cluster: SlurmCluster, jobs: list[Planned], tag: str, timeout_s: float = 1800, limits: bool = False
         ) -> Played:
    """Submit the plan at its offsets and wait until every job is done and recorded; with `limits`, each job with
    its time limit (`--time`), else none (the partitions' MaxTime=INFINITE: unlimited, as many GPU clusters
    run)."""
    folder = cluster.root / "replay" / tag
    folder.mkdir(parents=True, exist_ok=True)
    began = time.time()
    started = datetime.fromtimestamp(int(began), UTC)
    ids: dict[str, str] = {}
    for job in jobs:
        delay = began + job.at_s - time.time()
        if delay > 0:
            time.sleep(delay)
        script = folder / f"{job.name}.sh"
        script.write_text(_JOB.format(dir=folder, startup=job.startup_s, steps=job.steps, every=job.every,
                                      cluster=CLUSTER))
        ids[job.name] = cluster.run(
            "sbatch", "--parsable", "-J", job.name, "-p", job.partition, f"--gres=gpu:{job.gpus}", "-A", "vision",
            "-c", "1", "--mem=100M", "--open-mode=append", "-o", str(folder / f"{job.name}.out"),
            *([f"--time={job.limit_min}"] if limits else []), str(script),
        ).stdout.strip().split(";")[0]

    def done() -> bool:
        return cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.strip() == ""

    wait_until(f"replay scenario {tag}: every job done", done, timeout_s)

    def recorded() -> bool:
        out = cluster.run("sacct", "-X", "--duplicates", "-n", "-P", "-j", ",".join(ids.values()),
                          "-o", "JobID,State,End", check=False).stdout
        rows = [line.split("|") for line in out.splitlines() if line]
        finished = {r[0] for r in rows if r[1].split()[0] in ("COMPLETED", "FAILED", "CANCELLED")}
        return finished >= set(ids.values()) and all(r[2] not in ("Unknown", "") for r in rows)

    wait_until(f"replay scenario {tag}: accounting of every run", recorded, 90)
    return Played(folder, started, datetime.fromtimestamp(int(time.time()) + 1, UTC), ids)


def collect(cluster: SlurmCluster, wh: Warehouse, since: datetime, folders: list[Path]) -> None:
    """`collect slurm` (runs, the slurmctld log's links, the policy in force) and `import` of the jobs'
    checkpoint and progress rows, then `analyze`."""
    collector = SlurmCollector(Options(
        cluster="", slurm_conf=str(cluster.conf), ctld_log=str(cluster.ctld_log), since=since - timedelta(seconds=5),
        lag=timedelta(seconds=30), window=timedelta(hours=1), timeout_s=60, policy=Policy()))
    for batch in collector.batches(wh.watermarks(collector.name)):
        wh.load_batch(batch)
    for folder in folders:
        path = folder / "checkpoints.jsonl"
        if path.exists():
            for batch in FileImporter(path, wh.input_columns("checkpoints"), "checkpoints").batches():
                wh.load_batch(batch)
    analyze(wh, AnalyticsSettings())


def read_policy(cluster: SlurmCluster, wh: Warehouse) -> None:
    """Only the policy in force (as `collect slurm` reads it before anything else), e.g. right after a change."""
    collector = SlurmCollector(Options(
        cluster="", slurm_conf=str(cluster.conf), since=datetime.now(UTC), until=datetime.now(UTC),
        timeout_s=60, policy=Policy()))
    for batch in collector.batches(wh.watermarks(collector.name)):
        if "scheduler_policy" in batch.frames:
            wh.load_batch(batch)


# -- the figures a play and its replay are compared on (bench_replay_real, test_slurm_replay) ---------------

TIERS = ("high", "low")
# A figure by name ("preemptions", "victims", "lost GPU-h", then per tier and "all": "<tier> wait p50",
# "wait p90" (first-start wait), "queue GPU-h" (GPUs x every wait: the first and each to restart, from the
# previous run's end), "completed", "completion p50" (last end less submission)); None: unknown.
Named = dict[str, float | None]


def _quantile(values: list[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks (DuckDB's quantile_cont, as the ledger's views)."""
    if not values:
        return None
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


@dataclass
class JobRecord:
    """One job as both sides measure it (seconds; completion None: not completed)."""

    tier: str
    gpus: int
    first_wait_s: float
    queue_s: float
    completion_s: float | None


def _per_tier(jobs: list[JobRecord]) -> Named:
    found: Named = {}
    for tier in (*TIERS, "all"):
        mine = [j for j in jobs if tier in ("all", j.tier)]
        done = [j.completion_s for j in mine if j.completion_s is not None]
        found[f"{tier} wait p50"] = _quantile([j.first_wait_s for j in mine], 0.5)
        found[f"{tier} wait p90"] = _quantile([j.first_wait_s for j in mine], 0.9)
        found[f"{tier} queue GPU-h"] = sum(j.gpus * j.queue_s for j in mine) / 3600.0
        found[f"{tier} completed"] = float(len(done))
        found[f"{tier} completion p50"] = _quantile(done, 0.5)
    return found


def real_figures(wh: Warehouse, window: Window) -> Named:
    """The record's figures for the jobs submitted in `window` (a run not started is waiting at its end)."""
    ledger = observed_figures(wh, window)
    rows = wh.query(
        "SELECT j.job_id, j.tier, j.gpus, epoch(j.submit_time) AS submit, r.state, epoch(r.start_time) AS start, "
        "epoch(r.end_time) AS stop FROM jobs AS j JOIN job_runs AS r ON r.cluster = j.cluster AND r.job_id = j.job_id "
        "WHERE j.cluster = $c AND j.submit_time >= $t0 AND j.submit_time < $t1 ORDER BY j.job_id, r.run",
        {"c": window.cluster, "t0": window.start, "t1": window.end}).rows()
    end = window.end.timestamp()
    by_job: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_job.setdefault(row[0], []).append(row)
    jobs = []
    for runs in by_job.values():
        _, tier, gpus, submit = runs[0][:4]
        queue, since = 0.0, submit
        for *_, start, stop in runs:
            queue += (start if start is not None else end) - since
            since = stop if stop is not None else end
        first = (runs[0][5] if runs[0][5] is not None else end) - submit
        last = runs[-1]
        jobs.append(JobRecord(tier, gpus, first, queue, last[6] - submit if last[4] == "completed" else None))
    return {"preemptions": float(ledger.preemptions), "victims": float(ledger.victim_jobs),
            "lost GPU-h": ledger.lost_gpu_h, **_per_tier(jobs)}


def replay_figures(workload: Workload, out: Outcome) -> Named:
    """The same figures from a replay, between times truncated to the record's resolution (whole seconds)."""
    step = workload.resolution_s

    def recorded(t: float) -> float:
        return math.floor(t / step) * step if step else t

    horizon = out.horizon_s
    jobs = []
    for j, run_ids in enumerate(out.job_runs):
        spec = out.jobs[j]
        submit = recorded(spec.submit_s)
        runs = [out.runs[r] for r in run_ids]
        queue, since, first = 0.0, submit, horizon - submit
        for k, run in enumerate(runs):
            start = recorded(run.start_s) if run.start_s is not None and run.start_s < horizon else horizon
            first = start - submit if k == 0 else first
            queue += start - since
            since = recorded(run.end_s) if run.end_s is not None and run.end_s < horizon else horizon
        last = runs[-1] if runs else None
        completion = None
        if last is not None and last.state == "completed" and last.end_s is not None and last.end_s <= horizon:
            completion = recorded(last.end_s) - submit
        jobs.append(JobRecord(spec.tier, spec.gpus, first, queue, completion))
    ledger = outcome_figures(out, workload.warmup_measured, workload.resolution_s)
    return {"preemptions": float(ledger.preemptions), "victims": float(ledger.victim_jobs),
            "lost GPU-h": ledger.lost_gpu_h, **_per_tier(jobs)}
