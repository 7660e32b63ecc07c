"""The cluster simulator with ground truth.

Three parts, usable apart:
- `analytics.simulator.workload.generate_jobs(SimConfig)`: job specs from a seed;
- `analytics.simulator.engine.simulate_jobs(jobs, pools, policy, horizon_s)`: the pure
  scheduler core (also the engine threshold tuning replays recorded jobs on);
- `analytics.simulator.frames`: the outcome as raw-contract frames, GPU samples per day.

`simulate(config)` runs the first two; `simulate_into(warehouse, config)` also
loads everything through the load API (source "simulator"): first one batch
with pools, jobs, runs, checkpoints and the truth tables, then one batch of GPU
samples per simulated day. Loading the same config again changes nothing.
Different configs should use different cluster names (or warehouses): rows of
one run are not deleted by another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from preemptlens.analytics.simulator import frames as sim_frames
from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.model import (
    JobSpec,
    PolicyChange,
    PolicyConfig,
    PoolSpec,
    SimConfig,
    WorkloadConfig,
    cluster_of,
)
from preemptlens.analytics.simulator.workload import generate_jobs
from preemptlens.contract import Batch
from preemptlens.warehouse import Warehouse

SOURCE = "simulator"

# The small cluster `preemptlens demo` simulates: 64 GPUs for two weeks, so scope creep shows.
DEMO = SimConfig(cluster="demo", days=14.0, pools=(PoolSpec("a100", nodes=8),))

Progress = Callable[[str], None]

__all__ = [
    "DEMO",
    "SOURCE",
    "PolicyChange",
    "PolicyConfig",
    "PoolSpec",
    "SimConfig",
    "SimSummary",
    "Simulation",
    "WorkloadConfig",
    "cluster_of",
    "simulate",
    "simulate_into",
]


@dataclass
class Simulation:
    config: SimConfig
    jobs: list[JobSpec]
    outcome: Outcome

    @cached_property
    def frames(self) -> dict[str, pl.DataFrame]:
        """Every table except gpu_samples, in contract shape."""
        sim, out = self.config, self.outcome
        return {
            "pools": sim_frames.pools_frame(sim),
            "scheduler_policy": sim_frames.policy_frame(sim),
            "jobs": sim_frames.jobs_frame(sim, out),
            "job_runs": sim_frames.job_runs_frame(sim, out),
            "checkpoints": sim_frames.checkpoints_frame(sim, out),
            "sim_truth_preemptions": sim_frames.truth_preemptions_frame(sim, out),
            "sim_truth_hoarding": sim_frames.truth_hoarding_frame(sim, out),
        }

    def gpu_samples(self) -> Iterator[pl.DataFrame]:
        """gpu_samples frames, one per simulated day, without a warehouse."""
        return sim_frames.gpu_sample_chunks(self.config, self.outcome)

    def batches(self) -> Iterator[Batch]:
        yield Batch(source=SOURCE, frames=dict(self.frames))
        for frame in self.gpu_samples():
            yield Batch(source=SOURCE, frames={"gpu_samples": frame})


@dataclass(frozen=True)
class SimSummary:
    cluster: str
    gpus: int
    days: float
    jobs: int
    runs: int
    preemptions: int
    hoarding_stretches: int
    checkpoints: int
    samples: int
    loaded: int
    unchanged: int
    quarantined: int
    simulate_s: float
    load_s: float

    def lines(self) -> list[str]:
        return [
            f"cluster {self.cluster}: {self.gpus} GPUs, {self.days:g} days",
            f"jobs {self.jobs}, runs {self.runs}, preemptions {self.preemptions}, "
            f"hoarding stretches {self.hoarding_stretches}",
            f"checkpoint/progress rows {self.checkpoints}, GPU samples {self.samples}",
            f"rows loaded {self.loaded}, unchanged {self.unchanged}, quarantined {self.quarantined}",
            f"simulated in {self.simulate_s:.1f} s, loaded in {self.load_s:.1f} s",
        ]


def simulate(config: SimConfig, progress: Progress | None = None) -> Simulation:
    jobs = generate_jobs(config)
    say = progress or (lambda _msg: None)
    say(f"simulating {len(jobs)} jobs on {config.gpus} GPUs over {config.days:g} days")
    outcome = simulate_jobs(
        jobs,
        config.pools,
        config.policy,
        config.horizon_s,
        grid_s=config.sample_step_s,
        progress=lambda t: say(f"scheduled day {t / 86400:.0f} of {config.days:g}"),
        changes=config.changes,
    )
    return Simulation(config, jobs, outcome)


def simulate_into(warehouse: Warehouse, config: SimConfig, progress: Progress | None = None) -> SimSummary:
    """Simulate `config` and load it all into `warehouse`; one transaction per batch."""
    say = progress or (lambda _msg: None)
    began = time.perf_counter()
    sim = simulate(config, say)
    simulated = time.perf_counter()
    loaded = unchanged = quarantined = samples = 0
    days = 0
    for batch in sim.batches():
        report = warehouse.load_batch(batch)
        loaded += report.loaded
        unchanged += report.unchanged
        quarantined += report.quarantined
        if "gpu_samples" in batch.frames:
            samples += batch.frames["gpu_samples"].height
            days += 1
            say(f"loaded GPU samples of day {days} ({samples:,} rows)")
        else:
            say(f"loaded jobs, runs, checkpoints and truth ({report.loaded:,} rows)")
    frames = sim.frames
    return SimSummary(
        cluster=config.cluster,
        gpus=config.gpus,
        days=config.days,
        jobs=frames["jobs"].height,
        runs=frames["job_runs"].height,
        preemptions=frames["sim_truth_preemptions"].height,
        hoarding_stretches=frames["sim_truth_hoarding"].height,
        checkpoints=frames["checkpoints"].height,
        samples=samples,
        loaded=loaded,
        unchanged=unchanged,
        quarantined=quarantined,
        simulate_s=simulated - began,
        load_s=time.perf_counter() - simulated,
    )
