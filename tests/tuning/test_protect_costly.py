"""The first fix is one a scheduler or preemptlens can apply: preemptlens's action, replayed as it acts, against
the truth of the same seed simulated again with the action in force; choosing victims by least live cost only as
a bound.

The seeded cluster of test_victim_order_replay.py: low-tier 1-GPU jobs that never finish, with different
checkpoint intervals (some none), and 1-GPU high-tier jobs arriving at seeded times. The past is simulated under
today's order (the lowest tier's youngest run first) and loaded. The truth of each action comes from simulating
the same jobs with it in force (simulator model.Protection: its cycle, marks, caps and hold times as
analytics/actions.py has them); the replay reads only the warehouse, and each figure is within 10% of the truth.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sim_cluster import default_settings, load_outcome
from test_victim_order_replay import CONFIG as VICTIM_ORDER_CONFIG
from test_victim_order_replay import SIM, seeded_jobs, truth

from preemptlens.analytics.actions import KaiProtectSettings, SlurmProtectSettings
from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.frames import truth_preemptions_frame
from preemptlens.analytics.simulator.model import PolicyConfig
from preemptlens.analytics.whatif import counterfactual
from preemptlens.analytics.whatif.replay import Variant, Window, run_variant
from preemptlens.analytics.whatif.tuning import context
from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

# The marks `suggest` tries: the configured one, a half and a quarter of it (each released at half its mark).
HIGH = 9600.0
MARKS = (HIGH, HIGH / 2, HIGH / 4)
ACTIONS = {
    "kai_protect": KaiProtectSettings(cost_high_gpu_s=HIGH, cost_low_gpu_s=HIGH / 2, near_completion_high=None,
                                      near_completion_low=None, max_jobs=8, max_pool_share=1.0, min_hold_s=600.0),
    "slurm_protect": SlurmProtectSettings(cost_high_gpu_s=HIGH, cost_low_gpu_s=HIGH / 2, max_pool_share=1.0),
}
# The past's replay settings are the victim-order test's (the same simulated cluster), plus the action's.
CONFIG = VICTIM_ORDER_CONFIG + """[kai_protect]
cost_high_gpu_s = 9600.0
cost_low_gpu_s = 4800.0
max_jobs = 8
max_pool_share = 1.0
min_hold_s = 600.0
[serve]
actions_interval_s = 300.0
"""


def policy_with(action: str, mark: float) -> PolicyConfig:
    return replace(SIM.policy, protection=ACTIONS[action].replayed(300.0, cost_high_gpu_s=mark,
                                                                   cost_low_gpu_s=mark / 2))


def number(text: str) -> float:
    return float(text.replace(",", ""))


def lost_gpu_h(out: Outcome) -> float:
    return float(truth_preemptions_frame(SIM, out)["lost_gpu_s"].sum()) / 3600.0


def net_gpu_h(none: PolicyConfig, other: PolicyConfig, weights: dict[str, float]) -> float:
    """The true net of `other` against `none`, as the counterfactual replays it: the window's jobs drained (run
    to completion with no arrivals after its end)."""
    jobs = seeded_jobs(5)
    tables = [counterfactual.job_table(simulate_jobs(jobs, SIM.pools, policy, math.inf), window_s=SIM.horizon_s)
              for policy in (none, other)]
    return float(counterfactual.net_per_job(*tables, weights).sum()) / 3600.0


@pytest.fixture(scope="module")
def past(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Outcome]]:
    """The warehouse of the past (today's order) and the truth of every policy the tests replay."""
    jobs = seeded_jobs(5)
    policies = {"today": SIM.policy, "none": replace(SIM.policy, enabled=False),
                "bound": replace(SIM.policy, victim_order="cost")}
    policies |= {f"{action} {mark:g}": policy_with(action, mark) for action in ACTIONS for mark in MARKS}
    outcomes = {name: simulate_jobs(jobs, SIM.pools, policy, SIM.horizon_s) for name, policy in policies.items()}
    root = tmp_path_factory.mktemp("protect_costly")
    load_outcome(root / "past.duckdb", SIM, outcomes["today"]).close()
    return root / "past.duckdb", outcomes


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_action_replayed_from_the_warehouse_is_its_truth(past: tuple[Path, dict[str, Outcome]],
                                                             action: str) -> None:
    path, outcomes = past
    settings = default_settings(min_run_s=0.0, grace_s=60.0, requeue_hold_s=120.0,
                                may_preempt={"critical": ["high", "normal", "low"], "high": ["normal", "low"]})
    with Warehouse(path) as wh:
        ctx = context(wh, Window("sim", SIM.start, SIM.start + timedelta(seconds=SIM.horizon_s)), settings)
    for mark in MARKS:
        protection = ACTIONS[action].replayed(300.0, cost_high_gpu_s=mark, cost_low_gpu_s=mark / 2)
        got = run_variant(ctx.workload, Variant(action, replace(ctx.workload.actual.policy, protection=protection)))
        # within 10%, not exact: the live cost the action reads needs each job's warm-up, which the replay takes
        # as the median measured one for jobs never restarted (as the live cost does), and the high-tier jobs
        # the action holds too (it holds any costly running job, preemptible or not) count against max_jobs
        for key, value in truth(outcomes[f"{action} {mark:g}"]).items():
            assert getattr(got, key) == pytest.approx(value, rel=0.10), (action, mark, key)
    # the action acts: it throws away less than today's order, and no more cheaply than the bound
    today, bound = truth(outcomes["today"]), truth(outcomes["bound"])
    held = truth(outcomes[f"{action} {HIGH / 4:g}"])
    assert bound["thrown_away_gpu_h"] < held["thrown_away_gpu_h"] < today["thrown_away_gpu_h"]


def test_suggest_names_the_action_its_replayed_net_and_the_bound_only_as_a_bound(
    past: tuple[Path, dict[str, Outcome]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, outcomes = past
    toml = path.with_suffix(".toml")
    toml.write_text(CONFIG)
    end = (SIM.start + timedelta(seconds=SIM.horizon_s)).isoformat()
    assert main(["--config", str(toml), "--warehouse", str(path), "suggest", "--cluster", "sim", "--start",
                 SIM.start.isoformat(), "--end", end, "--only", "protect_costly", "--no-store",
                 "--scheduler", "kai"]) == 0
    out = capsys.readouterr().out
    titles = re.findall(r"^\d+\. (.*)$", out, re.M)
    assert len(titles) == 1
    assert titles[0].startswith("Hold costly victims back: preemptlens's KAI non-preemptible hold from")
    assert "least live cost" not in titles[0]
    # the mark chosen is one of those tried, and its replayed figures and net are that mark's truth
    proposed = re.search(r"\[kai_protect\] cost_high_gpu_s, cost_low_gpu_s: not enabled -> enabled, enforced, "
                         r"cost_high_gpu_s = ([0-9.]+), cost_low_gpu_s = ([0-9.]+); at most 8 jobs", out)
    assert proposed is not None
    mark = float(proposed.group(1))
    assert mark in MARKS and float(proposed.group(2)) == mark / 2
    # (KAI's action also holds from 90% of the work done, its default: no job here gets that far)
    chosen = outcomes[f"kai_protect {mark:g}"]
    effect = next(line for line in out.splitlines() if line.startswith("   effect: "))
    lost = re.search(r"lost GPU-hours ([0-9.,]+) -> ([0-9.,]+)", effect)
    assert lost is not None
    assert number(lost.group(1)) == pytest.approx(lost_gpu_h(outcomes["today"]), abs=0.05)  # the replay's past
    assert number(lost.group(2)) == pytest.approx(lost_gpu_h(chosen), rel=0.10)
    with Warehouse(path) as wh:
        weights = dict(wh.query("select tier, weight from analytics_tier_weights").iter_rows())
    net = re.search(r"replayed net against plain queueing ([-+][0-9.,]+) GPU-h \[", effect)
    none = replace(SIM.policy, enabled=False)
    assert net is not None and number(net.group(1)) == pytest.approx(
        net_gpu_h(none, policy_with("kai_protect", mark), weights), rel=0.10)
    # the bound is shown, labelled, with its own net; it is the evidence's comparison, never the proposal
    bound = re.search(r"if the scheduler could choose: victims by least live cost \(a bound; no scheduler offers it, "
                      r"never the fix\): net ([-+][0-9.,]+) GPU-h", out)
    assert bound is not None and number(bound.group(1)) == pytest.approx(
        net_gpu_h(none, replace(SIM.policy, victim_order="cost"), weights), rel=0.10)
    assert "could choose" in out.split("victim order, both replayed over the window")[1].splitlines()[1]
    # the snippet is the action's own configuration
    assert "[kai_protect]\nenabled = true" in out.replace("   ", "") and "non-preemptible" in out

