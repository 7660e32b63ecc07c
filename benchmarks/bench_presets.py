"""Log presets on hostile lines: each preset's worst line beside a plain one, per 16 MB of log.

A tenant writes its own training log, so every byte the `logs` stream matches is untrusted. For each preset
this builds candidate worst lines of `--line-kb` KB (its own words repeated, each word followed by long runs of
what its patterns skip over: path characters, blanks, digits, escape sequences) and, beside them, a plain line
of the same preset (a real step or save line) repeated. `--mb` MB of each is written to a file under --root and
read by the stream's reader (LogReader.read, the same code `collect checkpoints` runs); the table gives, per
preset, the slowest candidate and the plain file's time side by side, CPU seconds per file.

    python benchmarks/bench_presets.py                # 64 KB lines, 16 MB per file
    PYTHONPATH=/path/to/other/tree python benchmarks/bench_presets.py   # the same against another version
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC
from pathlib import Path

from preemptlens.collectors.checkpoints.logs import NEEDLES, PRESETS, LogReader, patterns

STAMP = b"2026-09-01 10:00:00,000 "
# What a preset's patterns skip over between their words: runs of these make a backtracking pattern retry.
FILLERS = (b"a", b" ", b"0", b"/", b"\x1b[31m", b"-", b"=")
# A real line of each preset, the plain case.
PLAIN = {
    "hf_trainer": b"Saving model checkpoint to /scratch/out/checkpoint-1000",
    "lightning": b"Restored all states from the checkpoint at /ckpt/epoch=0-step=30.ckpt",
    "megatron": b" iteration      101/    1000 | consumed samples:         1616 | elapsed time per iteration (ms): 8 |",
    "deepspeed": b"[Rank 0] step=110, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
    "torchtitan": b"\x1b[31mstep: 11  \x1b[32mloss:  7.1234  \x1b[33mmemory: 10.00GiB(12.50%)",
    "keras": b"Epoch 3: val_loss improved from 0.91376 to 0.81000, saving model to ckpt/m.keras",
}
# Words that open a preset's patterns, beyond its prefilter words: each pattern's own literal start.
OPENERS = {
    "hf_trainer": (b"Saving model checkpoint to ", b"Deleting older checkpoint [",
                   b"Continuing training from global step ",
                   b"Resuming training from checkpoint with epoch 1 and global step "),
    "lightning": (b"Epoch 1, global step 2: ", b"Restored all states from the checkpoint at "),
    "megatron": (b"successfully loaded checkpoint from ", b"saving checkpoint at iteration ",
                 b"successfully saved checkpoint from iteration ", b" iteration 1/ ", b"iteration "),
    "deepspeed": (b"Saving model checkpoint: ", b"[Torch] Loading checkpoint from ", b"[Torch] Checkpoint global_step",
                  b"step=1, skipped="),
    "torchtitan": (b"step: ", b"step: 1 ", b"Loading the checkpoint from ", b"Saving the checkpoint"),
    "keras": (b"Epoch 1: ", b"Epoch 1: saving model to"),
}


def candidates(preset: str, size: int) -> list[bytes]:
    """Lines of `size` bytes (newline included) built from the preset's own words."""
    out = []
    for word in (*OPENERS[preset], *NEEDLES[preset]):
        for filler in FILLERS:
            for unit in (word, word + filler, word + filler * 64):
                out.append(_line(unit, size))
            out.append(_line(word + filler * size, size))  # one word, then the rest of the line one filler
    return out


def _line(unit: bytes, size: int) -> bytes:
    body = STAMP + unit * (size // len(unit) + 1)
    return body[: size - 1] + b"\n"


def cpu_seconds(reader: LogReader, path: Path) -> float:
    began = time.process_time()
    read, _ = reader.read(str(path), None)
    assert read.bytes_read == path.stat().st_size
    return time.process_time() - began


def write(path: Path, line: bytes, total: int) -> None:
    with path.open("wb") as f:
        for _ in range(max(1, total // len(line))):
            f.write(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--line-kb", type=int, default=64)
    parser.add_argument("--mb", type=int, default=16)
    parser.add_argument("--probe-kb", type=int, default=256, help="file size each candidate is first tried at")
    parser.add_argument("--root", default="/work")
    args = parser.parse_args()
    size = args.line_kb << 10
    with tempfile.TemporaryDirectory(dir=args.root, prefix="bench-presets-") as tmp:
        folder = Path(tmp)
        print(f"lines of {size:,} bytes, files of {args.mb} MB; CPU seconds per file\n")
        print(f"{'preset':<11} {'worst':>9} {'plain':>9} {'ratio':>7}  worst line (its start)")
        for preset in PRESETS:
            reader = LogReader(patterns([preset], "", ""), UTC, size + 1024, 1 << 40)
            probe = folder / "probe.log"
            worst, worst_s = b"", -1.0
            for line in candidates(preset, size):
                write(probe, line, args.probe_kb << 10)
                spent = cpu_seconds(reader, probe)
                if spent > worst_s:
                    worst, worst_s = line, spent
            hostile, plain = folder / "worst.log", folder / "plain.log"
            write(hostile, worst, args.mb << 20)
            write(plain, STAMP + PLAIN[preset] + b"\n", args.mb << 20)
            bad, good = cpu_seconds(reader, hostile), cpu_seconds(reader, plain)
            shown = repr(worst[len(STAMP): len(STAMP) + 48])
            print(f"{preset:<11} {bad:9.3f} {good:9.3f} {bad / max(good, 1e-6):7.1f}  {shown}")
            for p in (probe, hostile, plain):
                os.unlink(p)


if __name__ == "__main__":
    main()
