"""The rollback basis on a real framework: PyTorch Lightning trains a tiny model on CPU, checkpoints every 10
steps, is killed (SIGKILL, a preemption) past step 35 and restarted from its last checkpoint, step 30.

Its step lines come from `trainer.global_step` in `on_train_batch_end`, which counts completed optimizer
steps: the first report after resuming from step 30 says 31. With Lightning's own restore line ("Restored all
states from the checkpoint at .../epoch=0-step=30.ckpt") the restart resumed from 30 exactly; with the step lines
alone, from the first report minus one. Either way the loss is the time from when the first run completed step
30 to the kill, as the run's own log says (not one step short), and the warm-up ends when step 31 began."""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.checkpoints import CheckpointCollector
from preemptlens.commands.collect import hand_runs
from preemptlens.config import Config
from preemptlens.warehouse import Warehouse

pytest.importorskip("pytorch_lightning")

SCRIPT = '''
import logging, os, re, sys, time
logging.basicConfig(filename=sys.argv[1], format="%(asctime)s %(name)s %(message)s", level=logging.INFO)
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader, TensorDataset

class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, index):
        time.sleep(0.05)  # a step long enough for its time to be measured
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

class Steps(pl.Callback):
    def on_train_batch_end(self, trainer, *args):
        logging.getLogger("train").info("global_step %d", trainer.global_step)

torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(4000, 4), torch.randn(4000, 1)), batch_size=4)
saved = [f for f in os.listdir(sys.argv[2]) if f.endswith(".ckpt")] if os.path.isdir(sys.argv[2]) else []
last = max(saved, key=lambda f: int(re.search(r"step=(\\d+)", f).group(1)), default=None)
trainer = pl.Trainer(max_steps=60, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                     enable_model_summary=False, callbacks=[
                         pl.callbacks.ModelCheckpoint(dirpath=sys.argv[2], every_n_train_steps=10, save_top_k=-1),
                         Steps()])
trainer.fit(Tiny(), data, ckpt_path=None if last is None else os.path.join(sys.argv[2], last))
'''
STEP = re.compile(r"^(\S+ \S+) train global_step (\d+)$")
ME = pwd.getpwuid(os.getuid()).pw_name


def _wait(what: str, ok: Any, deadline_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    end = time.monotonic() + deadline_s
    while not ok():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the trainer exited with {proc.returncode}")
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(0.05)


def _steps(log: Path) -> list[tuple[float, int]]:
    out = []
    for line in log.read_text().splitlines():
        m = STEP.match(line)
        if m:
            out.append((datetime.fromisoformat(m.group(1).replace(",", ".")).astimezone(UTC).timestamp(),
                        int(m.group(2))))
    return out


@pytest.fixture(scope="module")
def preempted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two runs of one Lightning job: the first killed past step 35, the second resumed to step 60."""
    base = tmp_path_factory.mktemp("lightning")
    script, log, ckpt = base / "train.py", base / "logs" / "job.out", base / "ckpt"
    script.write_text(SCRIPT)
    log.parent.mkdir()
    env = {**os.environ, "TZ": "UTC", "PYTHONPATH": os.pathsep.join(sys.path)}
    first_start = time.time()
    first = subprocess.Popen([sys.executable, str(script), str(log), str(ckpt)], env=env)
    try:
        _wait("step 36 of the first run", lambda: any(s >= 36 for _, s in _steps(log)) if log.exists() else False,
              300, first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed = time.time()
    reached = _steps(log)
    second_start = time.time()
    second = subprocess.run([sys.executable, str(script), str(log), str(ckpt)], env=env, timeout=600, check=True)
    assert second.returncode == 0
    second_end = time.time()
    yield {"log": log, "first_start": first_start, "killed": killed, "second_start": second_start,
           "second_end": second_end, "first_steps": reached, "all_steps": _steps(log)}


def _ledger(run: dict[str, Any], tmp_path: Path, settings: dict[str, Any]) -> tuple[dict[str, Any], Warehouse]:
    wh = Warehouse(tmp_path / "w.duckdb")
    t = lambda s: datetime.fromtimestamp(s, UTC)  # noqa: E731
    wh.load("jobs", pl.DataFrame({"cluster": ["c1"], "job_id": ["j1"], "tier": ["low"], "preemptible": [True],
                                  "gpus": [1], "submit_time": [t(run["first_start"] - 1)], "user_name": [ME],
                                  "stdout_path": [str(run["log"])]}), "slurm")
    wh.load("job_runs", pl.DataFrame({
        "cluster": ["c1", "c1"], "job_id": ["j1", "j1"], "run": [1, 2], "gpus": [1, 1],
        "start_time": [t(run["first_start"]), t(run["second_start"])],
        "end_time": [t(run["killed"]), t(run["second_end"])], "state": ["preempted", "completed"]}), "slurm")
    collector = CheckpointCollector(Config(values={"checkpoints": {
        "streams": ["logs"], "log_roots": [str(run["log"].parent)], **settings}}), "c1", ["logs"])
    hand_runs(collector, wh)
    for batch in collector.batches(wh.watermarks(collector.name)):
        wh.load_batch(batch)
    analyze(wh, AnalyticsSettings())
    (row,) = wh.query("SELECT basis, progress_source, lost_s, warmup_s FROM preemption_ledger").to_dicts()
    return row, wh


def _truth(run: dict[str, Any]) -> tuple[float, float, float]:
    """When the first run completed step 30, the time one step took around it, and when the restart began step
    31 (its first report less one step's time, at the restart's own rate)."""
    first = dict((s, when) for when, s in run["first_steps"])
    second = [(when, s) for when, s in run["all_steps"] if when > run["second_start"]]
    (t31, s31), (t32, s32) = second[0], second[1]
    assert (s31, s32) == (31, 32)  # resumed from step 30: the first report counts 31 completed steps
    return first[30], first[31] - first[30], t31 - (t32 - t31)


@pytest.mark.parametrize("settings", [
    {"log_presets": ["lightning"], "log_progress_pattern": r"global_step (?P<step>\d+)$"},
    {"log_presets": [], "log_progress_pattern": r"global_step (?P<step>\d+)$"},
], ids=["with-restore-line", "step-lines-alone"])
def test_rollback_from_a_real_lightning_restart(preempted: dict[str, Any], tmp_path: Path,
                                                settings: dict[str, Any]) -> None:
    row, wh = _ledger(preempted, tmp_path, settings)
    at_30, one_step, began_31 = _truth(preempted)
    assert row["basis"] == "rollback"
    restores = wh.query("SELECT step FROM checkpoints WHERE kind = 'restore'")["step"].to_list()
    assert restores == ([30.0] if settings["log_presets"] else [])
    assert row["progress_source"] == ("log:lightning" if settings["log_presets"] else "log:custom")
    assert wh.query("SELECT count(*) AS n FROM checkpoints WHERE kind = 'checkpoint'")["n"][0] == 0
    # the first run completed step 30 at at_30 (a report at that very step): lost is the time since, to the kill
    expected = preempted["killed"] - at_30
    assert row["lost_s"] == pytest.approx(expected, abs=0.005), (row["lost_s"], expected)
    # one step short would be a whole step less (a step takes >= 50 ms here)
    assert one_step >= 0.05 and abs(row["lost_s"] - (expected - one_step)) > one_step / 2
    # the warm-up runs from the restart's start until it began step 31
    assert row["warmup_s"] == pytest.approx(began_31 - preempted["second_start"], abs=0.01)
    wh.close()
