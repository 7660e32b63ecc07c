"""The trigger threshold in the scheduler core: a job preempts only once it has waited `trigger_wait_s`.

One node of 8 GPUs, full of a low job that runs past the horizon; a high job asks for GPUs at 1000 s. PolicyConfig's
defaults otherwise (min_run 600 s, grace 60 s: the victim saves no final checkpoint, so it dies at signal + 60 s).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyChange, PolicyConfig, PoolSpec
from preemptlens.errors import ConfigError

POOL = (PoolSpec("p", nodes=1),)
LOW = JobSpec(job_id="low", tier="low", preemptible=True, pool="p", gpus=8, submit_s=0.0, work_s=86400.0)


def high(submit_s: float, job_id: str = "high") -> JobSpec:
    return JobSpec(job_id=job_id, tier="high", preemptible=False, pool="p", gpus=8, submit_s=submit_s, work_s=600.0)


def first_start(out: Outcome, job_id: str) -> float | None:
    j = next(i for i, job in enumerate(out.jobs) if job.job_id == job_id)
    return out.runs[out.job_runs[j][0]].start_s


@pytest.mark.parametrize("trigger", [0.0, 300.0, 1800.0])
def test_preemption_waits_for_the_trigger(trigger: float) -> None:
    out = simulate_jobs([LOW, high(1000.0)], POOL, PolicyConfig(trigger_wait_s=trigger), 10000.0)
    (p,) = out.preemptions()
    # signalled once the high job has waited the trigger, killed after the 60 s grace, when the high job starts
    assert p.time_s == 1000.0 + trigger + 60.0
    assert first_start(out, "high") == p.time_s


def test_a_job_that_starts_before_its_trigger_preempts_nobody() -> None:
    # the low job ends at 1500 s on its own; with a 1800 s trigger the high job just waits for it
    short = replace(LOW, work_s=1500.0)
    out = simulate_jobs([short, high(1000.0)], POOL, PolicyConfig(trigger_wait_s=1800.0), 10000.0)
    assert out.preemptions() == []
    assert first_start(out, "high") == 1500.0


def test_a_policy_change_brings_the_trigger_of_jobs_already_waiting() -> None:
    # preemption off at first; at 2000 s it is turned on with a 600 s trigger: the high job, waiting since 1000 s,
    # has waited long enough at once
    off = PolicyConfig(enabled=False)
    change = PolicyChange(at_s=2000.0, pools=("p",), policy=PolicyConfig(trigger_wait_s=600.0))
    out = simulate_jobs([LOW, high(1000.0)], POOL, off, 10000.0, changes=(change,))
    (p,) = out.preemptions()
    assert p.time_s == 2000.0 + 60.0
    # a job arriving under the new policy waits its own trigger
    later = simulate_jobs([LOW, high(2500.0)], POOL, off, 10000.0, changes=(change,))
    (q,) = later.preemptions()
    assert q.time_s == 2500.0 + 600.0 + 60.0


def test_negative_trigger_is_refused() -> None:
    with pytest.raises(ConfigError, match="trigger_wait_s"):
        PolicyConfig(trigger_wait_s=-1.0)
