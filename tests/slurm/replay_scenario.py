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

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from slurm_harness import CLUSTER, SlurmCluster, wait_until

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
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


def play(cluster: SlurmCluster, jobs: list[Planned], tag: str, timeout_s: float = 1800) -> Played:
    """Submit the plan at its offsets and wait until every job is done and recorded."""
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
            "-c", "1", "--mem=100M", "--open-mode=append", "-o", str(folder / f"{job.name}.out"), str(script),
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
