"""Small simulated clusters written to a warehouse through the real load API and analysed.

Imported by the tests of this folder as `sim_cluster` (pytest puts the folder on
sys.path). The simulation's JobSpecs are kept only to make scenarios; the code
under test reads the warehouse alone.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.frames import (
    checkpoints_frame,
    gpu_sample_chunks,
    job_runs_frame,
    jobs_frame,
    pools_frame,
    truth_preemptions_frame,
)
from preemptlens.analytics.simulator.model import PolicyConfig, SimConfig, WorkloadConfig, cluster_of
from preemptlens.analytics.simulator.workload import generate_jobs
from preemptlens.analytics.whatif.settings import TuningSettings, Window
from preemptlens.warehouse import Warehouse


def sim_config(
    *, gpus: int = 96, days: float = 2.0, seed: int = 11, policy: dict[str, Any] | None = None, **workload: Any
) -> SimConfig:
    base = WorkloadConfig(seed=seed, load=workload.pop("load", 1.1), hoarding_share=workload.pop("hoarding_share", 0.0))
    return SimConfig(
        cluster="sim",
        days=days,
        pools=cluster_of(gpus),
        workload=replace(base, **workload),
        policy=PolicyConfig(**(policy or {})),
    )


def build(path: Path, sim: SimConfig, *, samples: bool = False) -> Warehouse:
    """Simulate `sim`, load it, analyze it; the open warehouse is returned."""
    jobs = generate_jobs(sim)
    return load_outcome(path, sim, simulate_jobs(jobs, sim.pools, sim.policy, sim.horizon_s, sim.sample_step_s),
                        samples=samples)


def load_outcome(path: Path, sim: SimConfig, out: Outcome, *, samples: bool = False) -> Warehouse:
    """Load a simulated outcome of `sim`'s cluster (its jobs may be hand-made), analyze it; the open warehouse."""
    wh = Warehouse(path)
    wh.load("pools", pools_frame(sim), "simulator")
    wh.load("jobs", jobs_frame(sim, out), "simulator")
    wh.load("job_runs", job_runs_frame(sim, out), "simulator")
    wh.load("checkpoints", checkpoints_frame(sim, out), "simulator")
    wh.load("sim_truth_preemptions", truth_preemptions_frame(sim, out), "simulator")
    if samples:
        for chunk in gpu_sample_chunks(sim, out):
            wh.load("gpu_samples", chunk, "simulator")
    analyze(wh, AnalyticsSettings(), tuning=default_settings())
    return wh


# High churn: many short jobs and many high-tier arrivals, so two days show enough preemptions.
CHURN: dict[str, Any] = {"gpus": 64, "load": 1.3, "high_share": 0.3, "work_median_s": 1800.0}


def default_settings(**overrides: Any) -> TuningSettings:
    """No jittered replays unless a test asks: these tests read which change is suggested, not its interval, and
    the draws would replay every candidate nine times (tests/conftest.py)."""
    return TuningSettings(**{"processes": 2, "jitter_replays": 0, **overrides})


class Clusters:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, tuple[Warehouse, Window]] = {}

    def get(self, name: str, *, samples: bool = False, **kwargs: Any) -> tuple[Warehouse, Window]:
        if name not in self.built:
            sim = sim_config(**kwargs)
            wh = build(self.root / f"{name}.duckdb", sim, samples=samples)
            self.built[name] = (wh, Window("sim", sim.start, sim.start + timedelta(seconds=sim.horizon_s)))
        return self.built[name]

    def close(self) -> None:
        # The files are thrown away: neither a reader snapshot (Warehouse.close publishes one) nor a
        # checkpoint of the database file is worth its minute at the end of the session.
        for wh, _ in self.built.values():
            wh.con.execute("PRAGMA disable_checkpoint_on_shutdown")
            wh.con.close()
