"""Every run's end classified by its cause (run_ends) on a real Slurm 22.05: a preemption, a node failure
(slurmd stopped), a `scancel`, a `scontrol requeue`, a time limit, a crash and a job that stopped making progress.

Jobs report their progress (a `progress` row a step, in the contract's columns, loaded with `preemptlens import`
as in replay_scenario.py); run 1 of each ends as its name says, and a requeued job's later run reports once and
completes. Only the low job holds GPUs, so the 8-GPU high job preempts it alone:

- `victim` (low, 4 GPUs): reports every second until `pre` (high, 8 GPUs) preempts it: PREEMPTED, requeued.
- `cancel`: reports every second until the test's `scancel`: "CANCELLED by 0", by its own user (root).
- `admin`: submitted as user nobody (sbatch --uid), sleeps until root's `scancel`: "CANCELLED by 0", by an admin.
- `requeue`: reports every second until the test's `scontrol requeue`: REQUEUED, then run 2.
- `limit` (--time=1): reports every second until Slurm kills it at its time limit (a minute, enforced some
  seconds later): TIMEOUT.
- `crash`: reports three times, then exits 1: FAILED.
- `hang`: reports four times, then sleeps; the test, a watchdog, cancels it once it was silent for
  analytics.hang_min_s (60 s, the setting's least) and more: CANCELLED, classified a hang.
- `node`, once every other job is done (the cluster has one node): slurmd is stopped while it runs, slurmctld
  sets the node DOWN after SlurmdTimeout (10 s here, restored after): NODE_FAIL, and the job is requeued
  (JobRequeue=1) and runs again once slurmd is back.

The time limit and the hang set the wall time: about two minutes. This module reads only its own jobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slurm_harness import CLUSTER, SlurmCluster, wait_until

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.files import FileImporter
from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.slow

OTHER_USER = "nobody"
HANG_MIN_S = 60.0  # analytics.hang_min_s: its least allowed value
NODE_TIMEOUT_S = 10  # SlurmdTimeout while slurmd is stopped

# Run 1 reports `reports` times, one every `every` seconds, then does `then`; a later run reports once and
# completes. `sleep & wait` lets the TERM trap run at once.
_JOB = r"""#!/bin/bash
run=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
me="\"cluster\":\"{cluster}\",\"job_id\":\"$SLURM_JOB_ID\",\"run\":$run"
report() {{ echo "{{$me,\"time\":$(date +%s.%N),\"step\":$1,\"kind\":\"progress\"}}" >> {rows}; }}
trap 'exit 143' TERM
if [ "$run" -ge 2 ]; then report 1; exit 0; fi
step=0
while [ "$step" -lt {reports} ]; do
  sleep {every} & wait $!
  step=$(( step + 1 ))
  report "$step"
done
{then}
"""
_FOREVER = 100000
_SLEEP = "sleep 600 & wait $!"


class Play:
    def __init__(self, cluster: SlurmCluster) -> None:
        self.cluster = cluster
        self.dir = cluster.root / "run-ends"
        self.dir.mkdir(exist_ok=True)
        self.rows = self.dir / "checkpoints.jsonl"
        self.ids: dict[str, str] = {}

    def submit(self, name: str, *args: str, reports: int = _FOREVER, every: float = 1.0, then: str = _SLEEP,
               partition: str = "high", out: str = "") -> str:
        script = self.dir / f"{name}.sh"
        script.write_text(_JOB.format(cluster=CLUSTER, rows=self.rows, reports=reports, every=every, then=then))
        self.ids[name] = self.cluster.run(
            "sbatch", "--parsable", "-J", name, "-p", partition, "-A", "vision", "-c", "1", "--mem=100M",
            "-o", out or str(self.dir / f"{name}-%j.out"), *args, str(script),
        ).stdout.strip().split(";")[0]
        return self.ids[name]

    def reports(self, name: str, run: int = 1) -> list[float]:
        if not self.rows.exists():
            return []
        rows = [json.loads(line) for line in self.rows.read_text().splitlines() if line.strip()]
        return [r["time"] for r in rows if r["job_id"] == self.ids[name] and r["run"] == run]

    def wait_reports(self, name: str, count: int, run: int = 1, timeout: float = 60) -> None:
        wait_until(f"{name} ({self.ids[name]}) run {run}: {count} progress reports",
                   lambda: len(self.reports(name, run)) >= count, timeout, lambda: f": {self.reports(name, run)}")

    def sacct(self) -> dict[str, list[str]]:
        """Each job's runs as sacct records them: its State text per run, in order."""
        out = self.cluster.run("sacct", "-X", "--duplicates", "-n", "-P", "-j", ",".join(self.ids.values()),
                               "-o", "JobID,State,End", check=False).stdout
        names = {v: k for k, v in self.ids.items()}
        states: dict[str, list[str]] = {}
        for line in out.splitlines():
            job, state, end = line.split("|")
            states.setdefault(names[job], []).append(state if end not in ("Unknown", "") else "(running)")
        return states

    def queue_empty(self) -> bool:
        return self.cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.strip() == ""

    def running(self, name: str) -> bool:
        out = self.cluster.run("squeue", "-h", "-j", self.ids[name], "-o", "%T", check=False).stdout
        return out.strip() == "RUNNING"


def _silent_for(play: Play, name: str, seconds: float) -> bool:
    reports = play.reports(name)
    return len(reports) >= 4 and datetime.now(UTC).timestamp() - max(reports) >= seconds


@contextmanager
def _another_user(cluster: SlurmCluster) -> Iterator[None]:
    """Jobs may run as user nobody: it gets an association, and may reach the job scripts slurmd writes under the
    cluster's private folder (traversal only) while the block runs."""
    cluster.run("sacctmgr", "-i", "add", "user", OTHER_USER, "account=vision", f"cluster={CLUSTER}", check=False)
    # The folders down to slurmd's spool (it writes the job's script in a folder of its own there): made by the
    # harness with the process's umask, 077 once a test ran preemptlens's command line in this process.
    folders = [cluster.root, cluster.root / "spool", *(cluster.root / "spool").iterdir()]
    modes = [f.stat().st_mode for f in folders]
    for folder in folders:
        folder.chmod(0o711)
    try:
        yield
    finally:
        for folder, mode in zip(folders, modes, strict=True):
            folder.chmod(mode)


def _node_failure(cluster: SlurmCluster, play: Play) -> None:
    """`node` loses its node: slurmd stopped while it runs, back once sacct records the failure."""
    cluster.set_slurmd_timeout(NODE_TIMEOUT_S)
    try:
        play.submit("node", reports=0)
        wait_until("node running", lambda: play.running("node"), 60)
        cluster.stop_slurmd()
        try:
            wait_until("sacct recording the node's failure",
                       lambda: play.sacct().get("node", [""])[0] == "NODE_FAIL", 120, lambda: f": {play.sacct()}")
        finally:
            cluster.start_slurmd()
    finally:
        cluster.set_slurmd_timeout(0)
    play.wait_reports("node", 1, run=2, timeout=90)


@pytest.fixture(scope="module")
def ended(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    play = Play(slurm_cluster)
    began = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    play.submit("limit", "--time=1")
    play.submit("hang", reports=4, every=0.5)
    play.submit("crash", reports=3, every=0.5, then="exit 1")
    play.submit("cancel")
    play.submit("requeue")
    play.submit("victim", "--gres=gpu:4", partition="low")
    with _another_user(slurm_cluster):
        play.submit("admin", f"--uid={OTHER_USER}", "--gid=nogroup", "--chdir=/", reports=0, out="/dev/null")
        wait_until("admin running", lambda: play.running("admin"), 60, lambda: f": {play.sacct()}")
        for name in ("cancel", "requeue", "victim"):
            play.wait_reports(name, 3)
        slurm_cluster.run("scancel", play.ids["cancel"], play.ids["admin"])
    slurm_cluster.run("scontrol", "requeue", play.ids["requeue"])
    play.submit("pre", "--gres=gpu:8", reports=2, then="exit 0")
    for name in ("victim", "requeue"):
        play.wait_reports(name, 1, run=2, timeout=90)
    # The watchdog: the hang is cancelled once silent for longer than hang_min_s.
    wait_until("hang silent", lambda: _silent_for(play, "hang", HANG_MIN_S + 3), 120,
               lambda: f": {play.reports('hang')}")
    slurm_cluster.run("scancel", play.ids["hang"])
    wait_until("every job but the node's done (the time limit)", play.queue_empty, 180, lambda: f": {play.sacct()}")
    _node_failure(slurm_cluster, play)
    wait_until("the node's job done", play.queue_empty, 60, lambda: f": {play.sacct()}")

    def settled() -> bool:
        states = play.sacct()
        runs = sum(len(v) for v in states.values())
        return runs == 12 and "(running)" not in {s for v in states.values() for s in v}

    wait_until("accounting of every run", settled, 60, lambda: f": {play.sacct()}")
    wh = Warehouse(tmp_path_factory.mktemp("run-ends") / "w.duckdb")
    collector = SlurmCollector(Options(
        cluster="", slurm_conf=str(slurm_cluster.conf), ctld_log=str(slurm_cluster.ctld_log), since=began,
        lag=timedelta(seconds=30), window=timedelta(hours=1), timeout_s=60, policy=Policy()))
    for batch in collector.batches(wh.watermarks(collector.name)):
        wh.load_batch(batch)
    for batch in FileImporter(play.rows, wh.input_columns("checkpoints"), "checkpoints").batches():
        wh.load_batch(batch)
    analyze(wh, AnalyticsSettings(hang_min_s=HANG_MIN_S))
    yield {"ids": play.ids, "sacct": play.sacct(), "wh": wh, "rows": play.rows}
    wh.close()


def _ends(wh: Warehouse, ids: dict[str, str]) -> dict[tuple[str, int], dict[str, Any]]:
    names = {v: k for k, v in ids.items()}
    rows = wh.query("SELECT * FROM run_ends WHERE job_id IN (SELECT unnest($ids))", {"ids": list(ids.values())})
    return {(names[r["job_id"]], r["run"]): r for r in rows.to_dicts()}


def test_sacct_recorded_each_end(ended: dict[str, Any]) -> None:
    assert ended["sacct"] == {
        "limit": ["TIMEOUT"], "hang": ["CANCELLED by 0"], "crash": ["FAILED"], "cancel": ["CANCELLED by 0"],
        "requeue": ["REQUEUED", "COMPLETED"], "victim": ["PREEMPTED", "COMPLETED"], "pre": ["COMPLETED"],
        "node": ["NODE_FAIL", "COMPLETED"], "admin": ["CANCELLED by 0"],
    }


def test_every_end_classified_by_its_cause(ended: dict[str, Any]) -> None:
    ends = _ends(ended["wh"], ended["ids"])
    assert {k: v["cause"] for k, v in ends.items()} == {
        ("victim", 1): "preemption", ("node", 1): "node_failure", ("cancel", 1): "cancel",
        ("requeue", 1): "requeue", ("limit", 1): "time_limit", ("crash", 1): "crash", ("hang", 1): "hang",
        ("pre", 1): "completed", ("victim", 2): "completed", ("requeue", 2): "completed", ("node", 2): "completed",
        ("admin", 1): "cancel",
    }
    # the jobs that ran again after their end, and only those
    assert {k for k, v in ends.items() if v["restarted"]} == {("victim", 1), ("requeue", 1), ("node", 1)}


def test_who_asked_for_each_cancel(ended: dict[str, Any]) -> None:
    """sacct --json (22.05) names the requester (kill_request_user): root for the three scancels; for
    `scontrol requeue`, the preemption and the time limit it names nobody."""
    ends = _ends(ended["wh"], ended["ids"])
    by = {k: (v["ended_by"], v["cause_by"]) for k, v in ends.items() if k[1] == 1 and v["ended_by"] is not None}
    assert by == {("cancel", 1): ("root", "user"), ("hang", 1): ("root", "user"), ("admin", 1): ("root", "admin")}
    assert ends[("requeue", 1)]["cause_by"] is None


def test_the_hang_is_its_silence_the_others_were_reporting(ended: dict[str, Any]) -> None:
    ends = _ends(ended["wh"], ended["ids"])
    assert ends[("hang", 1)]["silent_s"] >= HANG_MIN_S
    assert ends[("hang", 1)]["usual_gap_s"] == pytest.approx(0.5, abs=0.4)
    # every other run that reported progress was still reporting within a few seconds of its end
    for key in (("cancel", 1), ("requeue", 1), ("limit", 1), ("crash", 1), ("victim", 1)):
        assert ends[key]["silent_s"] is not None and ends[key]["silent_s"] < 5, (key, ends[key])


def test_the_ledger_holds_the_preemption_alone(ended: dict[str, Any]) -> None:
    ids, wh = ended["ids"], ended["wh"]
    ledger = wh.query("SELECT victim_job_id, victim_run, preemptor_job_id FROM preemption_ledger "
                      "WHERE victim_job_id IN (SELECT unnest($ids))", {"ids": list(ids.values())})
    assert ledger.rows() == [(ids["victim"], 1, ids["pre"])]


def test_restarts_by_cause(ended: dict[str, Any]) -> None:
    wh = ended["wh"]
    # the warehouse holds this module's jobs alone, all in team (account) vision
    rows = wh.query("SELECT cause, sum(runs) AS runs, sum(restarts) AS restarts FROM restart_causes "
                    "WHERE level = 'team' AND team = 'vision' GROUP BY cause").rows()
    assert {cause: (runs, restarts) for cause, runs, restarts in rows} == {
        "preemption": (1, 1), "node_failure": (1, 1), "cancel": (2, 0), "requeue": (1, 1), "time_limit": (1, 0),
        "crash": (1, 0), "hang": (1, 0)}
