"""The replays split per pool on the suite's local Spark: the same figures as on one machine (issue 35, item 2)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from preemptlens.analytics.simulator import SimConfig, cluster_of
from preemptlens.analytics.simulator.model import PolicyConfig, WorkloadConfig
from preemptlens.analytics.simulator.workload import generate_jobs
from preemptlens.analytics.spark import replay_per_pool
from preemptlens.analytics.whatif.policy_in_force import PolicyBasis
from preemptlens.analytics.whatif.replay import Variant, Workload, pool_replays, pooled_figures, run_variant
from preemptlens.analytics.whatif.settings import Window


def _fleet() -> Workload:
    """Three pools of 16 GPUs, two days; a third of the jobs with a time limit (the reservations plan with it),
    whole-second times and a measured latency range (the jittered variant draws within them), half the
    warm-ups measured."""
    sim = SimConfig(days=2, pools=cluster_of(48, pools=3), workload=WorkloadConfig(seed=7))
    jobs = tuple(replace(j, time_limit_s=2 * j.work_s) if k % 3 == 0 else j for k, j in enumerate(generate_jobs(sim)))
    window = Window(sim.cluster, sim.start, sim.start + timedelta(seconds=sim.horizon_s))
    return Workload(window, sim.pools, jobs, PolicyBasis(sim.policy, {}, latency_range=(0.5, 2.0)), {}, (),
                    resolution_s=1.0, warmup_measured=frozenset(j.job_id for j in jobs[::2]))


VARIANTS = (
    Variant("today", PolicyConfig()),
    Variant("no preemption", PolicyConfig(enabled=False)),
    Variant("least cost", PolicyConfig(victim_order="cost")),
    Variant("slurm", PolicyConfig(scheduler="slurm", latency_s=1.0)),
    Variant("protected", PolicyConfig(), protect_near_completion=0.7),
    Variant("jittered", PolicyConfig(latency_s=1.0), jitter=3),
)


def test_per_pool_replays_on_spark_give_the_figures_of_one_machine(spark: Any) -> None:
    workload = _fleet()
    assert {r.pool.name for r in pool_replays(workload, VARIANTS[0])} == {p.name for p in workload.pools}
    on_one_machine = [run_variant(workload, v) for v in VARIANTS]
    # The variants preempt (else equal figures would show little), and differ from one another.
    assert on_one_machine[0].preemptions > 0 and on_one_machine[1].preemptions == 0
    assert on_one_machine[2].lost_gpu_h != on_one_machine[0].lost_gpu_h
    assert replay_per_pool(spark, workload, VARIANTS) == on_one_machine


def test_the_pools_replayed_apart_give_the_whole_replays_figures() -> None:
    # The split itself, without Spark: every pool alone, the parts merged on one machine.
    workload = _fleet()
    for variant in VARIANTS:
        parts = [replay.parts() for replay in pool_replays(workload, variant)]
        assert len(parts) == 3
        assert pooled_figures(workload, parts) == run_variant(workload, variant), variant.label
