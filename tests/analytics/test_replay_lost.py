"""The replay's lost progress and warm-up are the ledger's, for the same preemptions (issue 31).

Ground truth the test controls: the engine plays ten victims, one per pool, whose runs start at ten phases
within their second (0.05 s to 0.95 s) and are preempted before their first checkpoint, then restart at ten such
phases; the outcome is written down as Slurm records it (sacct truncates a run's start and end to the second,
the slurmctld log keeps the kill's millisecond as a link, the job's own progress and checkpoint rows keep
theirs) and analysed. The ledger counts lost progress since the run's start as recorded and a warm-up from the
restart's start as recorded (docs/figures.md, `lost_s`, `warmup_s`): each half a second more than the truth on
average over the phases. The replay's figure must count what the ledger counts: its times stand for true ones
with no phase within the second, so it counts the expectation. From the engine's exact times, it counted every
such preemption and warm-up half a second short: on the real Slurm (benchmarks/bench_replay_real.py, e31c play)
lost GPU-hours 0.0262 for the ledger's 0.0339, 3 of its 9 preemptions before a checkpoint.
"""

from __future__ import annotations

import math

import pytest
from analytics_scenario import T0, Scenario, at

from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec
from preemptlens.analytics.whatif.replay import Window, observed_figures, outcome_figures

GPUS = 4
PHASES = tuple(0.05 + 0.1 * k for k in range(10))  # their mean is half a second
KILL_S = 5.9  # each preemptor's submission: it evicts at once (no grace, no minimum run time)
WARMUP_S = 2.0
HORIZON_S = 60.0


def _played() -> Outcome:
    """Per pool k: a low job on the whole pool from PHASES[k], checkpointing every 20 s of work, and a high job
    that preempts it at 5.9 s and runs until 16 s + PHASES[k], when the victim restarts."""
    jobs, pools = [], []
    for k, phase in enumerate(PHASES):
        pools.append(PoolSpec(f"p{k}", 1, GPUS))
        jobs.append(JobSpec(f"V{k}", "low", True, f"p{k}", GPUS, phase, 100.0, checkpoint_interval_s=20.0,
                            warmup_s=WARMUP_S))
        jobs.append(JobSpec(f"P{k}", "high", False, f"p{k}", GPUS, KILL_S, 16.0 + phase - KILL_S))
    policy = PolicyConfig(min_run_s=0.0, grace_s=0.0, requeue_hold_s=0.0)
    out = simulate_jobs(jobs, pools, policy, horizon_s=HORIZON_S)
    found = sorted(out.preemptions(), key=lambda p: p.victim)
    assert [(p.run_start_s, p.time_s, p.last_checkpoint_s) for p in found] == [(ph, KILL_S, None) for ph in PHASES]
    assert [p.restart_s for p in found] == pytest.approx([16.0 + ph for ph in PHASES])
    return out


def _recorded(sc: Scenario, out: Outcome) -> None:
    """The outcome as Slurm records it: whole-second runs (truncated), the kill's link to the millisecond, the
    job's progress (a step a second of work) and checkpoint rows as it writes them."""
    for k in range(len(PHASES)):
        sc.pool(f"p{k}", GPUS)
    for job, runs in zip(out.jobs, out.job_runs, strict=True):
        sc.job(job.job_id, job.tier, job.gpus, job.pool, math.floor(job.submit_s), preemptible=job.preemptible)
        for r in runs:
            run = out.runs[r]
            assert run.start_s is not None
            ended = run.end_s is not None
            sc.run(job.job_id, run.run, job.gpus, job.pool, math.floor(run.start_s),
                   math.floor(run.end_s) if run.end_s is not None else None, run.state if ended else "running")
            stop = run.end_s if run.end_s is not None else HORIZON_S
            for began, until, done in run.work:
                reached = math.floor(done) + 1
                while began + reached - done <= min(until, stop):
                    sc.checkpoint(job.job_id, run.run, began + reached - done, reached, kind="progress")
                    reached += 1
            for t, step in run.checkpoints:
                if t <= stop:
                    sc.checkpoint(job.job_id, run.run, t, step)
            if run.state == "preempted":
                assert run.end_s is not None and run.preemptor is not None
                sc.link(job.job_id, run.end_s, out.jobs[run.preemptor].job_id, "preempted")
    sc.analyze()


def test_the_replay_counts_lost_progress_and_warmup_as_the_ledger_does(sc: Scenario) -> None:
    out = _played()
    _recorded(sc, out)
    ledger = observed_figures(sc.wh, Window("c1", T0, at(HORIZON_S)))
    assert ledger.preemptions == len(PHASES) and ledger.thrown_away_gpu_h is not None
    # the ledger: since the start as recorded (0 s), and each warm-up from the restart's recorded start (16 s)
    lost = GPUS * len(PHASES) * KILL_S
    warmup = GPUS * sum(WARMUP_S + phase for phase in PHASES)
    assert ledger.lost_gpu_h * 3600 == pytest.approx(lost, abs=1e-3)
    assert ledger.thrown_away_gpu_h * 3600 == pytest.approx(lost + warmup, abs=1e-3)
    replayed = outcome_figures(out, resolution_s=1.0)
    assert replayed.thrown_away_gpu_h is not None
    assert replayed.lost_gpu_h * 3600 == pytest.approx(lost, abs=1e-3)
    assert replayed.thrown_away_gpu_h * 3600 == pytest.approx(lost + warmup, abs=1e-3)
    # Read exactly (the simulator's own record, resolution 0), the figures are the truth.
    exact = outcome_figures(out)
    assert exact.lost_gpu_h * 3600 == pytest.approx(GPUS * sum(KILL_S - phase for phase in PHASES))
    assert exact.thrown_away_gpu_h is not None
    assert (exact.thrown_away_gpu_h - exact.lost_gpu_h) * 3600 == pytest.approx(GPUS * len(PHASES) * WARMUP_S)
