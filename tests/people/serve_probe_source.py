"""A collector for serve's tests: each run yields `--batches` batches of `--rows`
new jobs, continuing from its committed watermark, `--pause` seconds apart.
serve loads it by module path (`serve.collect = ["serve_probe_source ..."]`)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

import polars as pl

from preemptlens.config import Config
from preemptlens.contract import Batch, Watermark


@dataclass
class ProbeCollector:
    rows: int
    batches_per_run: int
    pause: float
    name: ClassVar[str] = "probe"
    tables: ClassVar[tuple[str, ...]] = ("jobs",)

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        done = int(watermarks.get(("c1", "jobs"), "0"))
        for b in range(done, done + self.batches_per_run):
            time.sleep(self.pause)
            frame = pl.DataFrame(
                {
                    "cluster": ["c1"] * self.rows,
                    "job_id": [f"{b}-{i}" for i in range(self.rows)],
                    "tier": ["low"] * self.rows,
                    "preemptible": [True] * self.rows,
                    "gpus": [1] * self.rows,
                    "submit_time": [datetime.now(UTC)] * self.rows,
                }
            )
            yield Batch("probe", {"jobs": frame}, watermarks=[Watermark("probe", "c1", "jobs", str(b + 1))])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--batches", type=int, default=1)
    parser.add_argument("--pause", type=float, default=0.0)


def build(args: argparse.Namespace, config: Config) -> ProbeCollector:
    del config
    return ProbeCollector(args.rows, args.batches, args.pause)
