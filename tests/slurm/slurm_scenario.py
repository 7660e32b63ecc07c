"""A preemption scenario driven on a real Slurm, with what it observed.

Low-priority jobs do `steps` one-second units of work, resume from their
last checkpoint after a requeue, and append checkpoints to a JSONL file in
the contract's `checkpoints` columns. Every run of every job appends what it
saw (start, SIGTERM) with sub-second times to an events file. High-priority
jobs are submitted one at a time, and the scenario waits until each has
started before the next, so each preemption has exactly one possible
preemptor: the ground truth the collector's output is checked against.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from slurm_harness import CLUSTER, SlurmCluster, wait_until

# The job scripts. A requeued run finds SLURM_RESTART_COUNT set; the run
# number the contract uses is that count + 1.
_JOB = r"""
run=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
id=${{SLURM_ARRAY_JOB_ID:+${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}}}
id=${{id:-$SLURM_JOB_ID}}
now() {{ date +%s.%N; }}
event() {{ echo "{{\"job_id\":\"$id\",\"run\":$run,\"event\":\"$1\",\"t\":$(now)}}" >> {events}; }}
event start
trap 'event term; exit 143' TERM
done_steps=$(grep -c "\"job_id\":\"$id\"" {ckpt} 2>/dev/null || true)
done_steps=${{done_steps:-0}}
step=$done_steps
while [ "$step" -lt {steps} ]; do
  sleep 1 & wait $!
  step=$(( step + 1 ))
  if [ {checkpoint} = 1 ]; then
    row="\"cluster\":\"{cluster}\",\"job_id\":\"$id\",\"run\":$run,\"time\":$(now)"
    echo "{{$row,\"kind\":\"checkpoint\",\"step\":$step}}" >> {ckpt}
  fi
done
event end
"""


@dataclass
class Observed:
    """What the jobs themselves reported, by (job_id, run)."""

    starts: dict[tuple[str, int], float] = field(default_factory=dict)
    terms: dict[tuple[str, int], float] = field(default_factory=dict)
    ends: dict[tuple[str, int], float] = field(default_factory=dict)
    # (victim job id, run) -> preemptor job id
    preemptor_of: dict[tuple[str, int], str] = field(default_factory=dict)
    gpus: dict[str, int] = field(default_factory=dict)
    partition: dict[str, str] = field(default_factory=dict)
    account: dict[str, str] = field(default_factory=dict)


@dataclass
class Scenario:
    cluster: SlurmCluster
    started_at: float = 0.0
    high_windows: list[tuple[str, float, float]] = field(default_factory=list)
    jobs: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # id -> partition, gpus, account

    @property
    def events(self) -> Path:
        return self.cluster.root / "jobs" / "events.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.cluster.root / "jobs" / "checkpoints.jsonl"

    def submit(self, name: str, partition: str, gpus: int, steps: int, account: str,
               *, checkpoint: bool, array: int = 0) -> str:
        script = _JOB.format(events=self.events, ckpt=self.checkpoints, steps=steps, cluster=CLUSTER,
                             checkpoint=1 if checkpoint else 0)
        path = self.cluster.root / "jobs" / f"{name}.sh"
        path.write_text("#!/bin/bash\n" + script)
        args = ["-J", name, "-p", partition, f"--gres=gpu:{gpus}", "-A", account, "-c", "1",
                "--mem=100M", "--open-mode=append", "-o", str(self.cluster.root / "jobs" / f"{name}.out")]
        if array:
            args.append(f"--array=0-{array - 1}")
        job = self.cluster.run("sbatch", "--parsable", *args, str(path)).stdout.strip().split(";")[0]
        for task in range(array):
            self.jobs[f"{job}_{task}"] = (partition, gpus, account)
        if not array:
            self.jobs[job] = (partition, gpus, account)
        return job

    def read(self) -> list[dict[str, object]]:
        if not self.events.exists():
            return []
        return [json.loads(line) for line in self.events.read_text().splitlines() if line.strip()]

    def wait_for(self, what: str, ok: Callable[[], bool], timeout: float) -> None:
        wait_until(f"scenario: {what}", ok, timeout, lambda: f"; events: {self.read()}")

    def running(self, job_id: str, run: int = 1) -> bool:
        return any(e["job_id"] == job_id and e["run"] == run and e["event"] == "start" for e in self.read())

    def squeue_empty(self) -> bool:
        return self.cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.strip() == ""

    def play(self, midway: Callable[[], None] | None = None) -> Observed:
        """About 80 s: three low jobs (one an array of two) fill the 8 GPUs;
        a 4-GPU high job preempts some of them; after they are back, an
        8-GPU high job preempts everything running (every low job, the array
        tasks too: they are long enough to still be there); all then complete.
        `midway` runs while the victims of the first preemption are running
        again (their runs not yet ended)."""
        self.started_at = time.time()
        low_a = self.submit("low-train", "low", 4, 24, "vision", checkpoint=True)
        low_b = self.submit("low-array", "low", 1, 40, "speech", checkpoint=True, array=2)
        low_c = self.submit("low-eval", "low", 2, 40, "vision", checkpoint=False)
        lows = [low_a, f"{low_b}_0", f"{low_b}_1", low_c]
        self.wait_for("all low jobs running", lambda: all(self.running(j) for j in lows), 40)
        time.sleep(3)
        self._high("high-infer", 4, 6)
        self.wait_for("victims of the first high job back", lambda: self._all_back(), 60)
        if midway is not None:
            midway()
        time.sleep(2)
        self._high("high-big", 8, 5)
        self.wait_for("every job finished", self.squeue_empty, 120)
        return self.observed()

    def _high(self, name: str, gpus: int, steps: int) -> None:
        submitted = time.time()
        job = self.submit(name, "high", gpus, steps, "speech", checkpoint=False)
        self.wait_for(f"{name} running", lambda: self.running(job), 40)
        self.high_windows.append((job, submitted, time.time()))

    def _all_back(self) -> bool:
        events = self.read()
        termed = {(e["job_id"], e["run"]) for e in events if e["event"] == "term"}
        started = {(e["job_id"], e["run"]) for e in events if e["event"] == "start"}
        return bool(termed) and all((j, r + 1) in started for j, r in termed)

    def observed(self) -> Observed:
        obs = Observed()
        for job, (partition, gpus, account) in self.jobs.items():
            obs.partition[job], obs.gpus[job], obs.account[job] = partition, gpus, account
        for e in self.read():
            key = (str(e["job_id"]), int(e["run"]))  # type: ignore[call-overload]
            t = float(e["t"])  # type: ignore[arg-type]
            {"start": obs.starts, "term": obs.terms, "end": obs.ends}[str(e["event"])][key] = t
        for key, t in obs.terms.items():
            for job, submitted, started in self.high_windows:
                if submitted <= t <= started + 1:
                    obs.preemptor_of[key] = job
        return obs
