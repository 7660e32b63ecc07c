"""preemptlens's actions replayed as they act (model.Protection, engine `_act`): held at the action's cycle from
the live cost then, within max_jobs, and the victims taken in the scheduler's own order around what is held,
not by least cost.

One node of 4 GPUs holds 4 low-tier 1-GPU runs that never finish: C and D checkpoint every 600 s (little to
lose), B and A never do (their cost grows with their age). They start at 0, 60, 120 and 180 s: A is the
youngest, so today's order (the youngest first) takes A, then B, D, C. 1-GPU high-tier jobs arrive later. The
live cost the action reads is GPUs x (progress since the last checkpoint + warm-up 0 + requeue hold 120 s):
B reaches 1,500 GPU-s at 1,500 s (held at the cycle of 1,500 s), A at 1,560 s (held from the cycle of 1,800 s,
when the cap lets it).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec, Protection
from preemptlens.errors import ConfigError

POOL = (PoolSpec("p", nodes=1, gpus_per_node=4),)
POLICY = PolicyConfig(min_run_s=0.0, grace_s=0.0, requeue_hold_s=120.0)
LOW = {"C": (0.0, 600.0), "D": (60.0, 600.0), "B": (120.0, None), "A": (180.0, None)}


def jobs(*high_at: float, high_work_s: float = 7200.0) -> list[JobSpec]:
    found = [JobSpec(job_id=name, tier="low", preemptible=True, pool="p", gpus=1, submit_s=submit,
                     work_s=10 * 86400.0, checkpoint_interval_s=every, priority_value=100.0)
             for name, (submit, every) in LOW.items()]
    found += [JobSpec(job_id=f"high{k}", tier="high", preemptible=False, pool="p", gpus=1, submit_s=at,
                      work_s=high_work_s, priority_value=10_000.0) for k, at in enumerate(high_at)]
    return found


def victims(out: Outcome, specs: list[JobSpec]) -> list[str]:
    return [specs[p.victim].job_id for p in sorted(out.preemptions(), key=lambda p: p.time_s)]


def run(specs: list[JobSpec], policy: PolicyConfig) -> list[str]:
    return victims(simulate_jobs(specs, POOL, policy, 4 * 3600.0), specs)


def protect(action: str = "kai_protect", **given: float) -> Protection:
    settings = {"cost_high_gpu_s": 1500.0, "cost_low_gpu_s": 1500.0, "max_jobs": 1, "max_pool_share": 1.0,
                "min_hold_s": 0.0, "cycle_s": 300.0, **given}
    return Protection(action, **settings)  # type: ignore[arg-type]


def test_today_takes_the_youngest_and_the_ideal_the_cheapest() -> None:
    specs = jobs(1850.0, 1900.0)
    assert run(specs, POLICY) == ["A", "B"]
    # the bound: least live cost, which no scheduler offers (C and D lost under 600 s)
    assert set(run(specs, replace(POLICY, victim_order="cost"))) == {"C", "D"}


def test_a_held_victim_is_skipped_and_the_next_in_todays_order_goes() -> None:
    specs = jobs(1850.0, 1900.0)
    # B held from the cycle of 1,500 s; A reaches the mark at 1,560 s but max_jobs = 1 keeps it unheld
    got = run(specs, replace(POLICY, protection=protect()))
    assert got == ["A", "D"]  # not C, the cheaper: the scheduler's order, around what is held
    # two may be held: A too, from the cycle of 1,800 s
    assert run(specs, replace(POLICY, protection=protect(max_jobs=2))) == ["D", "C"]


def test_the_hold_starts_at_the_actions_cycle_not_when_the_cost_crosses() -> None:
    # A crossed the mark at 1,560 s; a preemptor at 1,790 s comes before the cycle of 1,800 s that holds it
    assert run(jobs(1790.0), replace(POLICY, protection=protect(max_jobs=2))) == ["A"]
    assert run(jobs(1810.0), replace(POLICY, protection=protect(max_jobs=2))) == ["D"]
    # a cycle of 10 min: the cycle of 1,200 s saw B below the mark, the next is at 1,800 s
    assert run(jobs(1700.0, 1710.0), replace(POLICY, protection=protect(cycle_s=600.0))) == ["A", "B"]


def test_the_pool_share_caps_the_holds() -> None:
    # a quarter of 4 GPUs is one GPU: A is not held even with room under max_jobs
    assert run(jobs(1850.0), replace(POLICY, protection=protect(max_jobs=5, max_pool_share=0.25))) == ["A"]


def test_slurm_protect_holds_a_waiting_victim_whose_next_run_is_not_preempted() -> None:
    # high0 evicts A at 1,850 s (cost then 1,790 GPU-s); A waits until high0 ends at 2,450 s, seen waiting by the
    # cycles of 2,100 and 2,400 s; high1 at 2,700 s would take A again (the youngest), but its run is held
    specs = jobs(1850.0, 2700.0, high_work_s=600.0)
    assert run(specs, POLICY) == ["A", "A"]
    assert run(specs, replace(POLICY, protection=protect("slurm_protect"))) == ["A", "B"]


def test_kueue_boost_orders_the_candidates_but_does_not_reach_the_preemptors_priority() -> None:
    # Kueue takes the lowest priority first, then the most recently admitted; B's boost of 100 (priority 200)
    # puts it after the unboosted low runs but stays below the high tier's 10,000, so it goes last, not never
    specs = jobs(1850.0, 1900.0, 1950.0, 2000.0)
    kueue = replace(POLICY, scheduler="kueue")
    assert run(specs, kueue) == ["A", "B", "D", "C"]
    boosted = replace(kueue, protection=protect("kueue_boost", boost_step=100, max_boost=500))
    assert run(specs, boosted) == ["A", "D", "C", "B"]
    # a boost that reaches the preemptors' priority keeps the run
    specs = [replace(s, priority_value=9_950.0) if s.job_id == "B" else s for s in specs]
    assert "B" not in run(specs, boosted)


def test_a_protection_names_an_action_preemptlens_has() -> None:
    with pytest.raises(ConfigError, match="kueue_boost, kai_protect, slurm_protect"):
        Protection("cheapest_victims")
