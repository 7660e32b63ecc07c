"""A tiny PyTorch training job that checkpoints with torch.distributed.checkpoint in torchtitan's layout.

Run as a Slurm batch job in its working directory: every `--every` steps dcp.save writes ./ckpt/step-<N>/
(FileSystemWriter: .distcp shards, then .metadata), logging torchtitan's own lines around it; a requeued
run loads the latest complete step. The job appends what it truly did to `--events`.
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

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402


def event(path: str, **fields: object) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"job": os.environ.get("SLURM_JOB_ID"),
                            "run": int(os.environ.get("SLURM_RESTART_COUNT", "0")) + 1, **fields}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, default=60)
    ap.add_argument("--step-s", type=float, default=0.1)
    ap.add_argument("--events", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    done = [int(m.group(1)) for p in Path("ckpt").glob("step-*")
            if (m := re.fullmatch(r"step-(\d+)", p.name)) and (p / ".metadata").exists()]
    event(args.events, event="start", t=time.time())
    if done:
        step = max(done)
        state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": torch.tensor(0)}
        log.info("Loading the checkpoint from ckpt/step-%d.", step)
        dcp.load(state, checkpoint_id=f"ckpt/step-{step}")
        model.load_state_dict(state["model"])
    while step < args.steps:
        time.sleep(args.step_s)
        x, y = torch.randn(2, 4), torch.randn(2, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        log.info("step: %d  loss: %.4f", step, float(loss))
        if step % args.every == 0:
            begin = time.monotonic()
            log.info("Saving the checkpoint.")
            dcp.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": torch.tensor(step)},
                     checkpoint_id=f"ckpt/step-{step}")
            event(args.events, event="checkpoint", step=step, t=time.time())
            log.info("Finished saving the checkpoint in %.2f seconds.", time.monotonic() - begin)
    event(args.events, event="end", t=time.time())


if __name__ == "__main__":
    main()
