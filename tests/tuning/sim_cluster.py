"""Small simulated clusters written to a warehouse through the real load API and analysed.

Imported by the tests of this folder as `sim_cluster` (pytest puts the folder on
sys.path). The simulation's JobSpecs are kept only to make scenarios; the code
under test reads the warehouse alone.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from analytics.params import SETTINGS, params_from
from analytics.refresh import analyze
from analytics.sim_engine import simulate_jobs
from analytics.sim_frames import (
    checkpoints_frame,
    gpu_sample_chunks,
    job_runs_frame,
    jobs_frame,
    pools_frame,
    truth_preemptions_frame,
)
from analytics.sim_model import PolicyConfig, SimConfig, WorkloadConfig, cluster_of
from analytics.sim_workload import generate_jobs
from preemptlens.config import Config
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
    out = simulate_jobs(jobs, sim.pools, sim.policy, sim.horizon_s, sim.sample_step_s)
    wh = Warehouse(path)
    wh.load("pools", pools_frame(sim), "simulator")
    wh.load("jobs", jobs_frame(sim, out), "simulator")
    wh.load("job_runs", job_runs_frame(sim, out), "simulator")
    wh.load("checkpoints", checkpoints_frame(sim, out), "simulator")
    wh.load("sim_truth_preemptions", truth_preemptions_frame(sim, out), "simulator")
    if samples:
        for chunk in gpu_sample_chunks(sim, out):
            wh.load("gpu_samples", chunk, "simulator")
    values = {s.key: s.default for s in SETTINGS.settings}
    analyze(wh, params_from(Config(values={"analytics": values})))
    return wh
