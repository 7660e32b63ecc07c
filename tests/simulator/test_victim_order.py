"""Cost-aware victim choice in the scheduler core, on hand-built clusters whose right answer is worked out here.

Every low job runs far past the horizon, so the only thing that moves is who the preemptor evicts. Defaults of
PolicyConfig: min_run 600 s, grace 60 s (victims here save no final checkpoint, so they die at signal + 60 s).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import replace

import pytest
import test_simulator as base

from preemptlens.analytics.simulator import simulate
from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec, SimConfig
from preemptlens.commands import simulate as simulate_command
from preemptlens.config import Config
from preemptlens.errors import ConfigError

HOLD = PolicyConfig().requeue_hold_s


def low(job_id: str, gpus: int, submit_s: float, interval: float | None) -> JobSpec:
    return JobSpec(job_id=job_id, tier="low", preemptible=True, pool="p", gpus=gpus, submit_s=submit_s,
                   work_s=86400.0, checkpoint_interval_s=interval)


def high(gpus: int, submit_s: float) -> JobSpec:
    return JobSpec(job_id="high", tier="high", preemptible=False, pool="p", gpus=gpus, submit_s=submit_s,
                   work_s=600.0)


def both(jobs: list[JobSpec], nodes: int) -> dict[str, Outcome]:
    return {
        order: simulate_jobs(jobs, (PoolSpec("p", nodes=nodes),), PolicyConfig(victim_order=order), 5000.0)
        for order in ("priority", "cost")
    }


def victims(out: Outcome) -> dict[str, float]:
    return {out.jobs[p.victim].job_id: p.lost_gpu_s for p in out.preemptions()}


def test_cost_order_evicts_the_freshest_checkpoint_where_today_evicts_the_youngest() -> None:
    # At 4000 s the last checkpoints are: a 3600, b 3700, c 3800 (every 1800 s from its start at 200), d none.
    jobs = [low("a", 2, 0, 3600.0), low("b", 2, 100, 600.0), low("c", 2, 200, 1800.0), low("d", 2, 300, None),
            high(2, 4000)]
    outcomes = both(jobs, nodes=1)
    # Equal preemptions; today's youngest victim d loses its whole run, c only since its checkpoint at 3800.
    assert victims(outcomes["priority"]) == {"d": 2 * (4060.0 - 300.0)}
    assert victims(outcomes["cost"]) == {"c": 2 * (4060.0 - 3800.0)}


def test_cost_order_takes_one_cheap_victim_over_two_young_ones_without_checkpoints() -> None:
    # Needs 2 GPUs on a full node: today's order takes the two youngest 1-GPU runs (no checkpoints, ~3000 s each);
    # the cheapest set is b alone (2 GPUs, checkpoint at 3800): 2 x (200 + hold) against about 2 x 3000.
    jobs = [low("a", 4, 0, 600.0), low("b", 2, 500, 300.0), low("c", 1, 1000, None), low("d", 1, 1100, None),
            high(2, 4000)]
    outcomes = both(jobs, nodes=1)
    assert victims(outcomes["priority"]) == {"c": 4060.0 - 1000.0, "d": 4060.0 - 1100.0}
    assert victims(outcomes["cost"]) == {"b": 2 * (4060.0 - 3800.0)}


def test_cost_order_clears_the_whole_nodes_of_least_cost_for_a_multi_node_job() -> None:
    # x, y, z fill nodes 1, 2, 3; at 4000 s x last saved at 3600, y never, z at 3800.
    jobs = [low("x", 8, 0, 600.0), low("y", 8, 100, None), low("z", 8, 200, 600.0), high(16, 4000)]
    outcomes = both(jobs, nodes=3)
    assert victims(outcomes["priority"]) == {"x": 8 * 460.0, "y": 8 * (4060.0 - 100.0)}
    assert victims(outcomes["cost"]) == {"x": 8 * 460.0, "z": 8 * 260.0}


def test_cost_order_respects_the_same_eligibility_as_today() -> None:
    # The cheapest run (checkpoint a second ago) is too young to evict: min_run_s still holds under the cost order.
    jobs = [low("old", 1, 0, None), low("young", 1, 3600, 60.0), high(1, 4000)]
    out = simulate_jobs(jobs, (PoolSpec("p", nodes=1, gpus_per_node=2),),
                        PolicyConfig(victim_order="cost", min_run_s=900.0), 5000.0)
    assert set(victims(out)) == {"old"}


def test_victim_order_must_be_known() -> None:
    with pytest.raises(ConfigError, match="victim_order"):
        replace(PolicyConfig(), victim_order="random")


def test_simulate_command_takes_the_victim_order() -> None:
    parser = argparse.ArgumentParser()
    simulate_command.add_arguments(parser)
    config = Config(values={"cluster": {"name": ""}})
    assert simulate_command.config_from(parser.parse_args([]), config).policy.victim_order == "priority"
    assert simulate_command.config_from(parser.parse_args(["--victim-order", "cost"]), config).policy.victim_order \
        == "cost"


def test_the_cost_order_keeps_the_schedulers_invariants(config: SimConfig) -> None:
    """The session cluster's checks of victims and GPUs, under the cost order (their functions, called here)."""
    by_cost = replace(config, policy=replace(config.policy, victim_order="cost"))
    simulation = simulate(by_cost)
    assert simulation.outcome.preemptions()
    base.test_victims_are_lower_tier_preemptible_and_ran_min_run_time(simulation, by_cost)
    base.test_no_gpu_is_ever_double_allocated(simulation)


def test_cost_order_finds_the_cheapest_node_past_the_quickest_warm_ups() -> None:
    # The search visits nodes by a bound from their victims' warm-ups (no progress lost): node 0's victim warms up
    # in 60 s but has never saved (about 3900 s to lose), node 1's warms up in 600 s and saved at 3960.
    jobs = [replace(low("quick", 1, 0, None), warmup_s=60.0), replace(low("saved", 1, 60, 300.0), warmup_s=600.0),
            high(1, 4000)]
    out = simulate_jobs(jobs, (PoolSpec("p", nodes=2, gpus_per_node=1),), PolicyConfig(victim_order="cost"), 5000.0)
    assert victims(out) == {"saved": 4060.0 - 3960.0}


def test_the_cost_orders_bounded_search_chooses_as_visiting_every_node(config: SimConfig,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The session cluster under the cost order: the same runs, victims and GPUs when the searches stop at the
    bound as when they price every node, and the bound does stop them."""
    from preemptlens.analytics.simulator import engine

    by_cost = replace(config.policy, victim_order="cost")
    visited = [0]
    walk = engine._Scheduler._by_cost_bound

    def counted(self: engine._Scheduler, pool: int, need: int) -> Iterator[tuple[float, int, int]]:
        for node in walk(self, pool, need):
            visited[0] += 1
            yield node

    def replay() -> list[tuple[object, ...]]:
        jobs = simulate(replace(config, policy=by_cost)).outcome
        return [(r.job, r.run, r.start_s, r.end_s, r.state, r.gpu_ids, r.preemptor) for r in jobs.runs]

    monkeypatch.setattr(engine._Scheduler, "_by_cost_bound", counted)
    bounded = replay()
    bounded_visits, visited[0] = visited[0], 0
    monkeypatch.setattr(engine._Scheduler, "_passes", staticmethod(lambda bound, cost: False))
    every = replay()
    assert any(r[4] == "preempted" for r in bounded)
    assert bounded == every
    assert 0 < bounded_visits < visited[0]
