"""A blocked job's reserved start (PolicyConfig.backfill "reserve", Slurm's EASY backfill) against greedy backfill.

Greedy backfill lets lower jobs take every GPU that frees up, so a big job that may not preempt can wait for
ever behind a stream of small ones; with a reservation it starts once the GPUs held at its arrival are let go,
and lower jobs still start ahead of it where they do not delay that start.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec, SimConfig, WorkloadConfig, cluster_of
from preemptlens.analytics.simulator.workload import generate_jobs
from preemptlens.analytics.whatif.replay import PolicyBasis, Variant, Window, Workload, run_variant

POOL = (PoolSpec("gpu", nodes=1, gpus_per_node=8),)
NO_PREEMPTION = PolicyConfig(may_preempt={}, min_run_s=0.0, grace_s=0.0, requeue_hold_s=0.0)


def low(job: str, gpus: int, at: float, work: float) -> JobSpec:
    return JobSpec(job, "low", True, "gpu", gpus, at, work)


def high(job: str, gpus: int, at: float, work: float) -> JobSpec:
    return JobSpec(job, "high", False, "gpu", gpus, at, work)


def start_of(out: Outcome, job_id: str) -> float | None:
    j = next(k for k, job in enumerate(out.jobs) if job.job_id == job_id)
    return out.runs[out.job_runs[j][0]].start_s


def test_a_big_job_is_not_starved_by_a_stream_of_small_ones() -> None:
    # A 1-GPU low job every 300 s, each an hour long: 12 GPUs of demand on 8, the queue never empties.
    horizon = 2 * 86400.0
    stream = [low(f"l{k}", 1, k * 300.0, 3600.0) for k in range(int(horizon // 300))]
    jobs = [*stream, high("H", 8, 7250.0, 1800.0)]
    greedy = simulate_jobs(jobs, POOL, replace(NO_PREEMPTION, backfill="greedy"), horizon)
    # Every GPU that frees up goes to the next low job: H never finds 8 free.
    assert start_of(greedy, "H") is None
    reserved = simulate_jobs(jobs, POOL, replace(NO_PREEMPTION, backfill="reserve"), horizon)
    # The GPUs held when H arrived are all let go by the last of those runs' ends; nothing started after
    # may delay that.
    held = [r.end_s for r in reserved.runs if r.start_s is not None and r.start_s <= 7250.0 < (r.end_s or horizon)]
    assert len(held) == 8
    assert start_of(reserved, "H") == max(held)  # type: ignore[type-var]


def test_a_short_job_still_starts_ahead_of_the_reserved_one() -> None:
    # A holds 4 GPUs until 10,000 s; H (all 8, may not preempt) is reserved for 10,000 s. S (2 GPUs) ends
    # at 3,020 s, before that: it backfills at once. L (2 GPUs) would hold its GPUs past 10,000 s: it waits.
    jobs = [low("A", 4, 0.0, 10_000.0), high("H", 8, 10.0, 1000.0), low("S", 2, 20.0, 3000.0),
            low("L", 2, 30.0, 20_000.0)]
    out = simulate_jobs(jobs, POOL, NO_PREEMPTION, 50_000.0)
    assert start_of(out, "S") == 20.0
    assert start_of(out, "H") == 10_000.0
    assert start_of(out, "L") == 11_000.0  # once H is done
    # Greedy: L takes its GPUs at once, and H waits until L is done.
    greedy = simulate_jobs(jobs, POOL, replace(NO_PREEMPTION, backfill="greedy"), 50_000.0)
    assert (start_of(greedy, "S"), start_of(greedy, "L"), start_of(greedy, "H")) == (20.0, 30.0, 20_030.0)


def test_a_long_job_may_use_the_gpus_the_reserved_one_leaves_over() -> None:
    # Two nodes. A (6 GPUs) holds node 1 until 5,000 s, B (7 GPUs) node 2 until 9,000 s: H (7 GPUs, on one
    # node) is reserved on node 1 at 5,000 s, which leaves 1 GPU there. L1, L2, L3 (1 GPU each) would outlast
    # that start: L1 takes node 2's free GPU, L2 the one left over on node 1; L3 waits though a GPU of node 1
    # is free now, as taking it would delay H.
    pool = (PoolSpec("gpu", nodes=2, gpus_per_node=8),)
    jobs = [low("A", 6, 0.0, 5000.0), low("B", 7, 0.0, 9000.0), high("H", 7, 10.0, 1000.0),
            low("L1", 1, 20.0, 50_000.0), low("L2", 1, 20.0, 50_000.0), low("L3", 1, 30.0, 50_000.0)]
    out = simulate_jobs(jobs, pool, NO_PREEMPTION, 100_000.0)
    assert (start_of(out, "L1"), start_of(out, "L2")) == (20.0, 20.0)
    assert start_of(out, "H") == 5000.0
    assert start_of(out, "L3") == 6000.0  # once H is done
    # Greedy: L3 takes that GPU, and H waits for node 2.
    greedy = simulate_jobs(jobs, pool, replace(NO_PREEMPTION, backfill="greedy"), 100_000.0)
    assert start_of(greedy, "L3") == 30.0 and start_of(greedy, "H") == 9000.0


def test_a_job_that_may_preempt_is_not_held_back() -> None:
    # With preemption H does not wait for a reservation: it evicts. The reservation only applies to a job
    # that will not preempt in the pass.
    jobs = [low("A", 8, 0.0, 10_000.0), high("H", 8, 10.0, 1000.0)]
    out = simulate_jobs(jobs, POOL, replace(NO_PREEMPTION, may_preempt={"high": ("low",)}), 50_000.0)
    assert start_of(out, "H") == 10.0


def test_a_replay_without_preemption_does_not_starve_big_high_tier_jobs() -> None:
    # The counterfactual of every what-if: the recorded window replayed with no preemption at all. 32 GPUs of
    # small normal and low jobs, and a few high-tier training runs of two whole nodes each (3% of the jobs,
    # seldom queued behind one another).
    sim = SimConfig(days=4, pools=cluster_of(32), workload=WorkloadConfig(
        seed=3, load=0.6, sizes=(1, 2, 4), size_weights=(0.6, 0.25, 0.15), high_share=0.03, critical_share=0.0,
        work_max_s=6 * 3600.0, hoarding_share=0.0))
    jobs = tuple(replace(j, gpus=16) if j.tier == "high" else j for j in generate_jobs(sim))
    window = Window(sim.cluster, sim.start, sim.start + timedelta(seconds=sim.horizon_s))
    workload = Workload(window, sim.pools, jobs, PolicyBasis(sim.policy, {}), {}, ())
    longest = max(j.startup_s + j.work_s for j in jobs)
    reserved = run_variant(workload, Variant("no preemption", PolicyConfig(may_preempt={})))
    greedy = run_variant(workload, Variant("no preemption, greedy", PolicyConfig(may_preempt={}, backfill="greedy")))
    # With a reserved start a high job waits at most for the runs it found, none longer than the longest run.
    assert reserved.high_wait_median_s is not None and reserved.high_wait_p90_s is not None
    assert reserved.high_wait_median_s <= reserved.high_wait_p90_s <= longest
    # Greedy backfill starves them: most wait longer than any run lasts (39,272 s median, 59,901 s p90, 6 h runs),
    # which is what made "preemption saved X hours of waiting" orders of magnitude too high.
    assert greedy.high_wait_median_s is not None and greedy.high_wait_median_s > longest
