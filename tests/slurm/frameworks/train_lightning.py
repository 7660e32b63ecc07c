"""A tiny PyTorch Lightning training job: real ModelCheckpoint files and Lightning's own log lines.

Run as a Slurm batch job in its working directory: checkpoints go to ./ckpt every `--every` steps
(epoch=E-step=S.ckpt, Lightning's default name), a requeued run resumes from the latest one, and the job
appends what it truly did (each checkpoint's step and the time its save returned) to `--events`.
Python logging prints asctime (UTC), as a site's logging setup would.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import time
from pathlib import Path

logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s %(message)s", level=logging.INFO)
log = logging.getLogger("train")

import pytorch_lightning as pl  # noqa: E402
import torch  # noqa: E402
from pytorch_lightning.callbacks import Callback, ModelCheckpoint  # noqa: E402
from pytorch_lightning.plugins.environments import LightningEnvironment  # noqa: E402


def event(path: str, **fields: object) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"job": os.environ.get("SLURM_JOB_ID"),
                            "run": int(os.environ.get("SLURM_RESTART_COUNT", "0")) + 1, **fields}) + "\n")


class Tiny(pl.LightningModule):
    def __init__(self, step_s: float) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.step_s = step_s

    def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
        time.sleep(self.step_s)
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Truth(Callback):
    """Each save's step and the moment it returned; each step as the job's own step line."""

    def __init__(self, events: str) -> None:
        self.events = events

    def on_save_checkpoint(self, trainer: pl.Trainer, module: pl.LightningModule, checkpoint: dict) -> None:
        self.pending = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args: object) -> None:
        if getattr(self, "pending", None) is not None:
            # ModelCheckpoint saves in its own on_train_batch_end, before this one: the file is written now.
            event(self.events, event="checkpoint", step=self.pending, t=time.time())
            self.pending = None
        log.info("step: %d  loss: %.4f", trainer.global_step, float(args[0]["loss"]))  # type: ignore[index]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, default=60)
    ap.add_argument("--step-s", type=float, default=0.1)
    ap.add_argument("--events", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(args.steps * 2, 4), torch.randn(args.steps * 2, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    saved = sorted(Path("ckpt").glob("*step=*.ckpt"), key=lambda p: int(re.search(r"step=(\d+)", p.name).group(1)))
    checkpoint = ModelCheckpoint(dirpath="ckpt", filename="{epoch}-{step}", monitor="step", mode="max",
                                 save_top_k=-1, every_n_train_steps=args.every, verbose=True)
    trainer = pl.Trainer(max_steps=args.steps, callbacks=[checkpoint, Truth(args.events)], logger=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                         plugins=[LightningEnvironment()])
    event(args.events, event="start", t=time.time())
    trainer.fit(Tiny(args.step_s), loader, ckpt_path=str(saved[-1]) if saved else None)
    event(args.events, event="end", t=time.time())


if __name__ == "__main__":
    main()
