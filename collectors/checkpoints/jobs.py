"""The recorded jobs a checkpoint, a log line or a metric belongs to.

A checkpoint directory, a job's output file or a metric's labels name a job
only by where it ran: a path template filled with the job's fields, the
job's working directory or output file as the scheduler recorded it, or the
labels GPU samples are attributed by. The shell hands the collector the runs
recorded since its lookback (contract.UsesRuns, warehouse.recorded_runs),
each job with every label that names it (its id, its job_aliases, a
Kubernetes job's namespace/name), and these lookups answer from them.
"""

from __future__ import annotations

import bisect
import os
import pwd
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

import polars as pl

# Slurm accounts whole seconds, cut down: a run recorded as ending at 12:00:11 ran until before 12:00:12, and
# what it logged in that second is its own.
END_SLACK_S = 1.0


def _start_and_run(span: tuple[float, float | None, int]) -> tuple[float, int]:
    """Spans sort by start, then run: never by their end, which is None while a run is on."""
    return span[0], span[2]


@dataclass(frozen=True)
class Job:
    cluster: str
    job_id: str
    user: str | None
    team: str | None
    name: str | None
    work_dir: str | None
    stdout_path: str | None
    stderr_path: str | None
    source: str | None = None

    def output_files(self) -> list[str]:
        """Where the job's log is: its recorded stdout and stderr; for a Slurm job that recorded neither (22.05
        accounting has no StdOut) sbatch's default, slurm-%j.out (slurm-%A_%a.out for an array task) in its
        working directory, which is the job id as the warehouse writes it."""
        found = [p for p in (self.stdout_path, self.stderr_path) if p]
        if not found and self.work_dir and self.source == "slurm":
            found.append(f"{self.work_dir.rstrip('/')}/slurm-{self.job_id}.out")
        return found


@dataclass
class Runs:
    """Runs of recorded jobs: (start, end or None while running, run) per job, in start order."""

    jobs: dict[tuple[str, str], Job] = field(default_factory=dict)
    runs: dict[tuple[str, str], list[tuple[float, float | None, int]]] = field(default_factory=dict)
    labels: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # Each job's run starts, in the order of `runs`: run_at bisects them without a key function (it runs once per
    # checkpoint and log line found).
    starts: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    # Each user's uid, looked up once a pass (a user has many jobs; the lookup reads the user database).
    uids: dict[str, int | None] = field(default_factory=dict)

    def uid(self, job: Job) -> int | None:
        """The uid of the job's user on this host, by the name the scheduler recorded; None when unknown here."""
        if not job.user:
            return None
        if job.user not in self.uids:
            try:
                self.uids[job.user] = pwd.getpwnam(job.user).pw_uid
            except (KeyError, ValueError):
                self.uids[job.user] = None
        return self.uids[job.user]

    @classmethod
    def from_frames(cls, runs: pl.DataFrame, labels: pl.DataFrame) -> Runs:
        out = cls()
        spans: dict[tuple[str, str], list[tuple[float, float | None, int]]] = defaultdict(list)
        for row in runs.iter_rows(named=True):
            key = (row["cluster"], row["job_id"])
            if key not in out.jobs:
                out.jobs[key] = Job(row["cluster"], row["job_id"], row["user_name"], row["team"], row["name"],
                                    row["work_dir"], row["stdout_path"], row["stderr_path"], row.get("source"))
            if row["start_time"] is not None:
                end = row["end_time"].timestamp() if row["end_time"] is not None else None
                spans[key].append((row["start_time"].timestamp(), end, int(row["run"])))
        out.runs = {k: sorted(v, key=_start_and_run) for k, v in spans.items()}
        out.starts = {k: [span[0] for span in v] for k, v in out.runs.items()}
        by_label: dict[tuple[str, str], list[str]] = defaultdict(list)
        for cluster, label, job_id in labels.select("cluster", "label", "job_id").iter_rows():
            if (cluster, job_id) in out.jobs:
                by_label[(cluster, label)].append(job_id)
        out.labels = dict(by_label)
        return out

    def run_at(self, cluster: str, job_id: str, t: float) -> int | None:
        """The job's run that was on at t (started at or before it, not ended before it, END_SLACK_S allowed);
        None when none was."""
        key = (cluster, job_id)
        spans = self.runs.get(key)
        if not spans:
            return None
        # By start alone: a tuple would compare a running run's end (None) with a number when t equals its start,
        # and a NaN time (a hostile line) finds nothing rather than raising.
        i = bisect.bisect_right(self.starts[key], t)
        while i:
            i -= 1
            start, end, run = spans[i]
            if start <= t and (end is None or t < end + END_SLACK_S):
                return run
        return None

    def on_at(self, cluster: str, job_ids: list[str], t: float) -> list[str]:
        """Of `job_ids`, those with a run on at t."""
        return [j for j in job_ids if self.run_at(cluster, j, t) is not None]

    def by_label(self, cluster: str, label: str, t: float) -> str | None:
        """The job a label names at t, as GPU samples are attributed: a recorded job id itself, else the one
        job an alias names that was on at t (aliases are reused: a pod name, a wrapped Slurm id)."""
        if (cluster, label) in self.jobs:
            return label
        named = self.labels.get((cluster, label), [])
        on = self.on_at(cluster, named, t)
        return on[0] if len(on) == 1 else None

    def by_dir(self, cluster: str, attribute: str) -> dict[str, list[str]]:
        """Jobs by the directory they worked in (`work_dir`) or wrote their output to (`stdout`)."""
        out: dict[str, list[str]] = defaultdict(list)
        for (c, job_id), job in self.jobs.items():
            if c != cluster:
                continue
            path = job.work_dir if attribute == "work_dir" else job.stdout_path
            if not path:
                continue
            folder = path if attribute == "work_dir" else os.path.dirname(path)
            out[os.path.normpath(folder)].append(job_id)
        return out

    def clusters(self) -> set[str]:
        return {c for c, _ in self.jobs}


class Point(NamedTuple):
    """One row before it is a frame row. A tuple: a first pass makes one per checkpoint and log line found, and the
    frame takes its columns from them at once (zip)."""

    job_id: str
    run: int | None
    time: float
    kind: str
    step: float | None
    save_s: float | None
    origin: str
    record: str
