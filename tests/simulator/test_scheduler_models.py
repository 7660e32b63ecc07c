"""The engine's models of each scheduler's own victim choice, queue order and timing, on hand-made clusters
whose right answer follows from the schedulers' sources (see analytics/simulator/engine.py, `_modelled_victims`).

One node of 8 GPUs, low jobs filling it, then one high job that must preempt.
"""

from __future__ import annotations

from dataclasses import replace

from preemptlens.analytics.simulator.engine import simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec

POOL = (PoolSpec("gpu", nodes=1, gpus_per_node=8),)
BASE = PolicyConfig(min_run_s=0.0, grace_s=0.0, requeue_hold_s=5.0, scheduler="slurm", queue_order="submit",
                    kill_at_grace_end=True)


def low(job: str, gpus: int, at: float, work: float = 500.0, **extra: object) -> JobSpec:
    return JobSpec(job, "low", True, "gpu", gpus, at, work, **extra)  # type: ignore[arg-type]


def high(job: str, gpus: int, at: float, work: float = 20.0) -> JobSpec:
    return JobSpec(job, "high", False, "gpu", gpus, at, work)


def victims(jobs: list[JobSpec], policy: PolicyConfig, horizon: float = 2000.0) -> list[str]:
    out = simulate_jobs(jobs, POOL, policy, horizon)
    return sorted(out.jobs[p.victim].job_id for p in out.preemptions() if out.jobs[p.preemptor].job_id == "H")


def test_slurm_takes_candidates_in_job_order_not_youngest_first() -> None:
    # a, b, c, d started in that order (1, 1, 2 and 4 GPUs): the oldest jobs go first in Slurm's job order.
    jobs = [low("a", 1, 0), low("b", 1, 10), low("c", 2, 20), low("d", 4, 30), high("H", 2, 100)]
    assert victims(jobs, BASE) == ["a", "b"]
    # The generic model (and Slurm with PreemptParameters=youngest_first) evicts the youngest first.
    assert victims(jobs, replace(BASE, youngest_first=True)) == ["d"]
    assert victims(jobs, replace(BASE, scheduler="generic")) == ["d"]


def test_slurm_reorder_passes_shed_victims_that_are_not_needed() -> None:
    # a (1 GPU) then b (4 GPUs) then c (2 GPUs), 1 GPU free; H needs 4. The first pass takes a and b (5 GPUs
    # freed); the reorder passes move b first, and b alone frees enough: one victim, not two.
    jobs = [low("a", 1, 0), low("b", 4, 10), low("c", 2, 20), high("H", 4, 100)]
    assert victims(jobs, BASE) == ["b"]
    # strict_order moves the run that made it fit to the front as well.
    assert victims(jobs, replace(BASE, strict_order=True)) == ["b"]


def test_slurm_exempts_young_runs_and_high_priority_ones() -> None:
    jobs = [low("a", 4, 0), low("b", 4, 90), high("H", 4, 100)]
    # PreemptExemptTime 60 s: b (10 s old) is exempt, a (100 s) is not, though a comes first anyway.
    assert victims(jobs, replace(BASE, min_run_s=60.0)) == ["a"]
    jobs = [low("a", 4, 50), low("b", 4, 90), high("H", 4, 100)]
    # Neither is old enough at 100 s: H waits until a turns 60 s old, at 110 s.
    out = simulate_jobs(jobs, POOL, replace(BASE, min_run_s=60.0), 2000.0)
    first = next(p for p in out.preemptions())
    assert (out.jobs[first.victim].job_id, first.time_s) == ("a", 110.0)
    # min_exempt_priority: a job whose priority is above it is never preempted.
    jobs = [low("a", 4, 0, priority_value=500.0), low("b", 4, 10, priority_value=50.0), high("H", 4, 100)]
    assert victims(jobs, replace(BASE, min_exempt_priority=100.0)) == ["b"]


def test_slurm_exemption_ends_on_the_whole_second() -> None:
    # Slurm keeps a start in whole seconds and compares it with the whole-second now (acct_policy.c,
    # acct_policy_is_job_preempt_exempt, slurm-22-05-11-1): a run started at 50.7 with PreemptExemptTime 60 may
    # be evicted from 110 s, not 110.7 s; H, waiting since 100 s, preempts it then.
    jobs = [low("a", 4, 50.7), low("b", 4, 90), high("H", 4, 100)]
    out = simulate_jobs(jobs, POOL, replace(BASE, min_run_s=60.0), 2000.0)
    first = next(p for p in out.preemptions())
    assert (out.jobs[first.victim].job_id, first.time_s) == ("a", 110.0)
    # The other models count the exemption from the true start.
    out = simulate_jobs(jobs, POOL, replace(BASE, min_run_s=60.0, scheduler="generic"), 2000.0)
    first = next(p for p in out.preemptions())
    assert (out.jobs[first.victim].job_id, first.time_s) == ("a", 110.7)


def test_slurm_sees_an_exemption_end_at_its_next_periodic_pass() -> None:
    # Nothing wakes slurmctld when a run's PreemptExemptTime ends: the main pass every sched_interval or backfill's
    # every bf_interval finds it (controller.c `_slurmctld_background`, backfill.c, slurm-22-05-11-1). With passes
    # every 30 s, a (exempt until 110 s) is preempted for H at 120 s, not at 110 s.
    jobs = [low("a", 4, 50), low("b", 4, 90), high("H", 4, 100)]
    policy = replace(BASE, min_run_s=60.0, pass_interval_s=30.0)
    first = next(p for p in simulate_jobs(jobs, POOL, policy, 2000.0).preemptions())
    assert first.time_s == 120.0
    # An event's pass before then acts on it: a 1-GPU job ending at 115 s wakes the scheduler.
    jobs = [low("a", 4, 50), low("b", 3, 90), low("c", 1, 90, work=25.0), high("H", 4, 100)]
    first = next(p for p in simulate_jobs(jobs, POOL, policy, 2000.0).preemptions())
    assert first.time_s == 115.0
    # With a latency, as with an event: the periodic pass is the pass itself (no latency on top).
    first = next(p for p in simulate_jobs(jobs[:2] + jobs[3:], POOL, replace(policy, latency_s=1.0),
                                          2000.0).preemptions())
    assert first.time_s == 120.0


def test_kueue_evicts_the_most_recently_admitted_and_adds_back_what_is_not_needed() -> None:
    # c (2 GPUs) is the newest, then b (4), then a (1); 1 GPU free; H needs 4: taking c then b fits, and
    # adding c back still fits, so only b goes.
    jobs = [low("a", 1, 0), low("b", 4, 10), low("c", 2, 20), high("H", 4, 100)]
    assert victims(jobs, replace(BASE, scheduler="kueue")) == ["b"]


def test_kai_evicts_the_newest_jobs_whole_until_the_preemptor_fits() -> None:
    jobs = [low("a", 1, 0), low("b", 4, 10), low("c", 2, 20), high("H", 4, 100)]
    # Newest first, no adding back: c (2 GPUs, 3 free) is not enough, c and b are.
    assert victims(jobs, replace(BASE, scheduler="kai")) == ["b", "c"]


def test_a_requeued_run_keeps_its_place_with_queue_order_submit() -> None:
    # v (4 GPUs) is preempted by H; w (4 GPUs) was submitted after v and waits. When H ends, v comes back first
    # under Slurm's job priority (its place is its submission), w first when the queue is by eligible time.
    jobs = [low("v", 4, 0), low("x", 4, 1), low("w", 4, 50), high("H", 4, 100, work=40.0)]

    def first_start_after_h(policy: PolicyConfig) -> str:
        out = simulate_jobs(jobs, POOL, policy, 2000.0)
        starts = [(out.runs[r].start_s, out.jobs[j].job_id) for j, runs in enumerate(out.job_runs) for r in runs
                  if out.runs[r].start_s is not None and out.runs[r].start_s >= 140.0]
        return min(starts)[1]

    assert first_start_after_h(BASE) == "v"
    assert first_start_after_h(replace(BASE, queue_order="eligible")) == "w"


def test_latency_delays_starts_after_gpus_are_let_go_but_not_submissions() -> None:
    jobs = [low("a", 8, 0, work=100.0), low("b", 8, 10, work=50.0)]
    out = simulate_jobs(jobs, POOL, replace(BASE, latency_s=1.5), 2000.0)
    starts = {out.jobs[r.job].job_id: r.start_s for r in out.runs}
    assert starts == {"a": 0.0, "b": 101.5}


def test_a_first_run_spends_its_start_up_before_working() -> None:
    jobs = [low("a", 8, 0, work=100.0, startup_s=7.0, checkpoint_interval_s=30.0)]
    out = simulate_jobs(jobs, POOL, BASE, 2000.0)
    run = out.runs[0]
    assert run.end_s == 107.0
    assert [t for t, _ in run.checkpoints] == [37.0, 67.0, 97.0]


def test_slurm_victim_that_saves_at_the_signal_holds_its_gpus_until_the_kill() -> None:
    jobs = [low("a", 8, 0, checkpoint_interval_s=100.0, final_checkpoint=True, save_s=5.0), high("H", 8, 50)]
    policy = replace(BASE, grace_by_tier={"low": 30.0})
    out = simulate_jobs(jobs, POOL, policy, 2000.0)
    run = out.runs[0]
    assert run.final_checkpoint and run.end_s == 80.0
    assert run.checkpoints[-1][0] == 50.0
    # Where a victim exits once saved (Kubernetes), the preemptor gets the GPUs then.
    out = simulate_jobs(jobs, POOL, replace(policy, kill_at_grace_end=False), 2000.0)
    assert out.runs[0].end_s == 55.0
