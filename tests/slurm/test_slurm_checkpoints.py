"""Lost progress measured from real checkpoints on a real Slurm: two real frameworks, preempted and restarted.

Two low jobs train tiny models on CPU and checkpoint with the frameworks' own code (frameworks/): PyTorch
Lightning's ModelCheckpoint (epoch=E-step=S.ckpt files) and torch.distributed.checkpoint in torchtitan's
layout (step-N/ with .metadata), logging with timestamps. After each has saved, the test waits 3 s and
submits an 8-GPU high job: both are preempted (requeued), restart from their last checkpoint and report
a step. The jobs themselves record the truth: each save's step and when it returned, and when SIGTERM came.

One scenario (about 50 s, most of it importing torch twice per job and Slurm's requeue hold) serves both
collections: checkpoint files and log lines give the `checkpoint` basis; step lines alone (no checkpoint
event read) give the `rollback` basis. Both must be within 2 s of the truth, and the truth is at least
2 s, so a loss of zero (or the whole run) fails.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from slurm_harness import CLUSTER, SlurmCluster, wait_until

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.checkpoints import CheckpointCollector
from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.commands.collect import hand_runs
from preemptlens.config import Config
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.slow
pytest.importorskip("torch")
pytest.importorskip("pytorch_lightning")

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
TOLERANCE_S = 2.0
EVERY = 120  # steps between checkpoints; a step takes 0.1 s, and the two jobs start some seconds apart
_WRAP = """#!/bin/bash
run=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
me="\\"job\\":\\"$SLURM_JOB_ID\\",\\"run\\":$run"
term() {{ echo "{{$me,\\"event\\":\\"term\\",\\"t\\":$(date +%s.%N)}}" >> {events}; }}
trap 'term; kill -TERM $child 2>/dev/null; wait $child; exit 143' TERM
{python} {script} --steps 600 --every {every} --step-s 0.1 --events {events} &
child=$!
wait $child
"""


class Truth:
    def __init__(self, path: Path) -> None:
        self.path = path

    def events(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def seen(self, job: str, run: int, event: str) -> bool:
        return any(e["job"] == job and e["run"] == run and e["event"] == event for e in self.events())

    def lost(self, job: str) -> float:
        """What run 1 truly lost: from its last completed save to SIGTERM."""
        term = next(e["t"] for e in self.events() if e["job"] == job and e["run"] == 1 and e["event"] == "term")
        saves = [e["t"] for e in self.events() if e["job"] == job and e["run"] == 1 and e["event"] == "checkpoint"
                 and e["t"] <= term]
        return float(term - max(saves))


def _submit(cluster: SlurmCluster, name: str, folder: Path, script: str, events: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder.parent / f"{name}.sh"
    wrapper.write_text(_WRAP.format(python=sys.executable, script=FRAMEWORKS / script, every=EVERY, events=events))
    return cluster.run("sbatch", "--parsable", "-J", name, "-p", "low", "--gres=gpu:4", "-A", "vision", "-c", "1",
                       "--mem=2G", f"--chdir={folder}", str(wrapper)).stdout.strip().split(";")[0]


def _collect(wh: Warehouse, collector: Any) -> None:
    hand_runs(collector, wh)
    for batch in collector.batches(wh.watermarks(collector.name)):
        wh.load_batch(batch)


@pytest.fixture(scope="module")
def preempted(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    base = slurm_cluster.root / "ckpt-scenario"
    shutil.rmtree(base, ignore_errors=True)
    truth = Truth(base / "events.jsonl")
    began = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    light = _submit(slurm_cluster, "light", base / "byname" / "light", "train_lightning.py", truth.path)
    torn = _submit(slurm_cluster, "dcp", base / "bywork" / "dcp-run", "train_dcp.py", truth.path)
    for job in (light, torn):
        wait_until(f"{job}'s first checkpoint", lambda job=job: truth.seen(job, 1, "checkpoint"), 90,
                   lambda: f": {truth.events()}")
    time.sleep(3)
    high = slurm_cluster.run("sbatch", "--parsable", "-J", "high", "-p", "high", "--gres=gpu:8", "-A", "speech", "-c",
                             "1", "--mem=100M", f"--chdir={base}", "--wrap", "sleep 2").stdout.strip().split(";")[0]
    rollback_config = {
        "checkpoints": {
            "streams": ["logs"], "log_roots": [str(base)], "log_presets": [],
            "log_progress_pattern": r"\bstep: (?P<step>\d+)\s+loss:",
        }
    }
    rollback_wh = Warehouse(tmp_path_factory.mktemp("rollback") / "w.duckdb")

    def collect(wh: Warehouse, settings: dict[str, Any], streams: list[str]) -> None:
        _collect(wh, SlurmCollector(Options(cluster=CLUSTER, slurm_conf=str(slurm_cluster.conf), since=began,
                                            lag=timedelta(seconds=30), window=timedelta(hours=1), timeout_s=60,
                                            policy=Policy())))
        _collect(wh, CheckpointCollector(Config(values=settings), CLUSTER, streams))

    for job in (light, torn):
        wait_until(f"{job} preempted", lambda job=job: truth.seen(job, 1, "term"), 40, lambda: f": {truth.events()}")
    # A collection during Slurm's requeue hold reads the first runs' logs: a requeued batch job's output file
    # is truncated when its next run starts, as the next collection finds.
    collect(rollback_wh, rollback_config, ["logs"])
    for job in (light, torn):
        # Back from its checkpoint, and past its first step line.
        wait_until(f"{job} restarted", lambda job=job: _stepped(base, job), 90, lambda: f": {truth.events()}")
    slurm_cluster.run("scancel", light, torn)
    ids = [light, torn, high]

    def settled() -> bool:
        out = slurm_cluster.run("sacct", "-X", "--duplicates", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,End",
                                check=False).stdout.split()
        return len(out) == 5 and all(not line.endswith("|Unknown") for line in out)

    wait_until("accounting of every run", settled, 60)
    config = {
        "checkpoints": {
            "roots": [{"path": str(base / "byname" / "{name}")},
                      {"path": str(base / "bywork" / "*"), "job": "work_dir"}],
            "log_roots": [str(base)],
        }
    }
    out = {"checkpoint": Warehouse(tmp_path_factory.mktemp("checkpoint") / "w.duckdb"), "rollback": rollback_wh}
    collect(out["checkpoint"], config, ["files", "logs"])
    collect(rollback_wh, rollback_config, ["logs"])
    for wh in out.values():
        analyze(wh, AnalyticsSettings())
    yield {"light": light, "dcp": torn}, truth, out
    for wh in out.values():
        wh.close()


def _stepped(base: Path, job: str) -> bool:
    """The job's second run logged a few steps (its output file is slurm-<id>.out in its working directory)."""
    for log in base.glob(f"*/*/slurm-{job}.out"):
        text = log.read_text(errors="replace")
        for marker in ("Restored all states", "Loading the checkpoint"):
            if marker in text:
                return text.split(marker)[-1].count("step: ") >= 5
    return False


def _ledger(wh: Warehouse, job: str) -> dict[str, Any]:
    rows = wh.query("SELECT * FROM preemption_ledger WHERE victim_job_id = $j", {"j": job}).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


@pytest.mark.parametrize("framework", ["light", "dcp"])
def test_lost_progress_from_real_checkpoints_within_two_seconds(preempted, framework: str) -> None:  # type: ignore[no-untyped-def]
    jobs, truth, whs = preempted
    job = jobs[framework]
    row = _ledger(whs["checkpoint"], job)
    assert row["basis"] == "checkpoint"
    expected = truth.lost(job)
    assert expected >= TOLERANCE_S  # a loss of zero would fail
    assert abs(row["lost_s"] - expected) <= TOLERANCE_S, (row["lost_s"], expected)
    allowed = {"light": {"files:lightning", "log:lightning"}, "dcp": {"files:dcp", "log:torchtitan"}}[framework]
    assert row["progress_source"] in allowed


def test_checkpoint_rows_carry_their_stream_step_and_save_time(preempted) -> None:  # type: ignore[no-untyped-def]
    jobs, truth, whs = preempted
    rows = whs["checkpoint"].query(
        "SELECT job_id, run, step, origin, save_s, time FROM checkpoints WHERE kind = 'checkpoint' ORDER BY time"
    ).to_dicts()
    saved = {(e["job"], float(e["step"])) for e in truth.events() if e["event"] == "checkpoint"}
    by_file = {(r["job_id"], r["step"]) for r in rows if str(r["origin"]).startswith("files:")}
    # Every save the jobs made is found on disk, with its step, by the layout of its framework.
    assert saved <= by_file
    dcp_files = {r["origin"] for r in rows if r["job_id"] == jobs["dcp"] and r["origin"].startswith("files")}
    assert dcp_files == {"files:dcp"}
    assert all(r["save_s"] is not None and r["save_s"] >= 0 for r in rows if r["origin"] == "files:dcp")
    # A save in the restarted run belongs to run 2.
    assert {r["run"] for r in rows if r["job_id"] == jobs["dcp"]} >= {1}


@pytest.mark.parametrize("framework", ["light", "dcp"])
def test_lost_progress_from_step_reports_alone_is_rollback_within_two_seconds(preempted, framework: str) -> None:  # type: ignore[no-untyped-def]
    jobs, truth, whs = preempted
    job = jobs[framework]
    assert whs["rollback"].query("SELECT count(*) AS n FROM checkpoints WHERE kind = 'checkpoint'")["n"][0] == 0
    row = _ledger(whs["rollback"], job)
    seen = whs["rollback"].query(
        "SELECT run, count(*) AS n, min(step), max(step), min(time), max(time) FROM checkpoints WHERE job_id = $j "
        "GROUP BY run UNION ALL SELECT run, NULL, NULL, NULL, start_time, end_time FROM job_runs WHERE job_id = $j",
        {"j": job}).rows()
    assert row["basis"] == "rollback", seen
    assert row["progress_source"] == "log:custom"
    assert abs(row["lost_s"] - truth.lost(job)) <= TOLERANCE_S, (row["lost_s"], truth.lost(job))


def test_a_second_collection_adds_nothing(preempted, slurm_cluster: SlurmCluster) -> None:  # type: ignore[no-untyped-def]
    _, _, whs = preempted
    wh = whs["checkpoint"]
    before = wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0]
    base = slurm_cluster.root / "ckpt-scenario"
    collector = CheckpointCollector(Config(values={"checkpoints": {
        "roots": [{"path": str(base / "byname" / "{name}")}, {"path": str(base / "bywork" / "*"), "job": "work_dir"}],
        "log_roots": [str(base)]}}), CLUSTER, ["files", "logs"])
    hand_runs(collector, wh)
    loaded = sum(wh.load_batch(b).loaded for b in collector.batches(wh.watermarks(collector.name)))
    assert loaded == 0
    assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == before
