"""Deterministic raw DCGM samples with known values, and what a collection must give.

Each host runs one exporter style (every label variant the collector
normalises). Raw samples come every 30 s, as dcgm-exporter collects them;
jobs change on and off the minute so that steps straddle job boundaries, a
GPU goes silent for a while (exporter down), and one GPU has stretches with
no power reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from tests.prometheus.openmetrics import ExporterStyle

RAW_S = 30
STEP_S = 60
CLUSTER = "test"

STYLES: dict[str, ExporterStyle] = {
    "k8s-a": ExporterStyle(hostname_label="Hostname", job_labels="pod"),
    "k8s-b": ExporterStyle(hostname_label="hostname", job_labels="exported_pod"),
    "slurm-a": ExporterStyle(job_labels="hpc_job"),
    "slurm-b": ExporterStyle(job_labels="jobid", hostname_label="hostname"),
    "mig-a": ExporterStyle(job_labels="hpc_job", model="NVIDIA A100-SXM4-40GB"),
    "rtx-a": ExporterStyle(job_labels="hpc_job", profiling=False, model="NVIDIA RTX 4000 Ada Generation"),
    "plain-a": ExporterStyle(job_labels="none"),
}


@dataclass(frozen=True)
class Gpu:
    host: str
    uuid: str
    instance: str
    index: int


GPUS: tuple[Gpu, ...] = (
    Gpu("k8s-a", "GPU-k8sa-0", "", 0),
    Gpu("k8s-a", "GPU-k8sa-1", "", 1),
    Gpu("k8s-b", "GPU-k8sb-0", "", 0),
    Gpu("k8s-b", "GPU-k8sb-1", "", 1),
    Gpu("slurm-a", "GPU-slua-0", "", 0),
    Gpu("slurm-a", "GPU-slua-1", "", 1),
    Gpu("slurm-b", "GPU-slub-0", "", 0),
    Gpu("mig-a", "GPU-miga-0", "1", 0),
    Gpu("mig-a", "GPU-miga-0", "2", 0),
    Gpu("rtx-a", "GPU-rtxa-0", "", 0),
    Gpu("plain-a", "GPU-plna-0", "", 0),
)


def _job_name(gpu: Gpu, n: int) -> str:
    style = STYLES[gpu.host]
    if style.job_labels in ("pod", "exported_pod"):
        return f"team-{n % 3}/train-{gpu.uuid[-6:].lower()}-{n}"
    if style.job_labels == "none":
        return ""
    return f"{4000 + n}_{gpu.index}" if n % 2 else str(9000 + n)


def raw_samples(end: datetime, hours: float, seed: int = 7) -> pl.DataFrame:
    """gpu_samples-shaped raw samples every 30 s over `hours` ending at `end`."""
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 / RAW_S)
    start_s = int(end.timestamp()) - (n - 1) * RAW_S
    frames = []
    for g, gpu in enumerate(GPUS):
        # Job segments of 3-40 raw samples: boundaries fall on and off the minute.
        jobs: list[str | None] = []
        k = 0
        while len(jobs) < n:
            length = int(rng.integers(3, 41))
            job = None if rng.random() < 0.25 else _job_name(gpu, k) or None
            jobs.extend([job] * length)
            k += 1
        busy = rng.integers(0, 101, n) / 100
        mem = rng.integers(0, 40_000, n).astype(np.float64)
        power = np.round(rng.uniform(40, 400, n), 3)
        times = [datetime.fromtimestamp(start_s + i * RAW_S, UTC) for i in range(n)]
        frame = pl.DataFrame(
            {
                "cluster": CLUSTER,
                "host": gpu.host,
                "gpu_uuid": gpu.uuid,
                "gpu_instance": gpu.instance,
                "gpu_index": gpu.index,
                "time": times,
                "busy": busy,
                "mem_used_mib": mem,
                "power_w": power,
                "job_id": pl.Series(jobs[:n], dtype=pl.String),
            }
        )
        if g == 3:
            # The exporter is down for 20 minutes: no samples at all.
            frame = frame.filter((pl.int_range(pl.len()) < 100) | (pl.int_range(pl.len()) >= 140))
        if g == 4:
            # Power is not reported for an hour while busy and memory are.
            frame = frame.with_columns(
                pl.when(pl.int_range(pl.len()).is_between(200, 320))
                .then(None)
                .otherwise("power_w")
                .alias("power_w")
            )
        frames.append(frame)
    return pl.concat(frames).with_columns(pl.col("time").dt.cast_time_unit("us"))


def expected(raw: pl.DataFrame, first: datetime, last: datetime, step_s: int = STEP_S) -> pl.DataFrame:
    """What a collection over [first, last] must store: per GPU and step t, the raw
    samples in (t - step, t]; busy and power averaged, memory maximum, the job of
    the latest sample. Busy of a GPU without profiling metrics is what GPU_UTIL
    carries: whole percent."""
    step_us = step_s * 1_000_000
    no_profiling = [h for h, s in STYLES.items() if not s.profiling]
    t = pl.col("time").dt.epoch("us")
    frame = raw.with_columns(
        pl.from_epoch((-(-t // step_us)) * step_us, time_unit="us")
        .dt.replace_time_zone("UTC")
        .alias("step_end"),
        pl.when(pl.col("host").is_in(no_profiling))
        .then((pl.col("busy") * 100).round(0) / 100)
        .otherwise("busy")
        .alias("busy"),
    )
    out = (
        frame.sort("time")
        .group_by("cluster", "host", "gpu_uuid", "gpu_instance", "step_end")
        .agg(
            pl.col("gpu_index").first(),
            pl.col("busy").mean(),
            pl.col("mem_used_mib").max(),
            pl.col("power_w").mean(),
            pl.col("job_id").last(),
        )
        .rename({"step_end": "time"})
        .filter(pl.col("time").is_between(first, last))
    )
    return out.select(
        "cluster",
        "host",
        "gpu_uuid",
        "gpu_instance",
        "gpu_index",
        "time",
        "busy",
        "mem_used_mib",
        "power_w",
        "job_id",
    ).sort("host", "gpu_uuid", "gpu_instance", "time")


def history_end(now: datetime | None = None) -> datetime:
    """Backfilled history ends on the hour, two hours or more before now, so that
    it neither overlaps the head block nor answers instant queries as live data."""
    now = now or datetime.now(UTC)
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
