"""`preemptlens suggest` replays cost-aware victim choice beside today's order; both columns against the truth.

The seeded cluster is full of low-tier 1-GPU jobs that never finish, with different checkpoint intervals
(and some without checkpoints), and 1-GPU high-tier jobs arrive at seeded times. Every arrival evicts exactly
one victim under either order and the GPUs come back at the same times, so both orders make the same
preemptions: the cost order only changes who is evicted. The past is simulated under today's order and loaded;
the cost order's truth comes from simulating the same jobs under it.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from sim_cluster import default_settings, load_outcome

from preemptlens.analytics.simulator.engine import Outcome, simulate_jobs
from preemptlens.analytics.simulator.frames import job_runs_frame, jobs_frame, truth_preemptions_frame
from preemptlens.analytics.simulator.model import JobSpec, PolicyConfig, PoolSpec, SimConfig
from preemptlens.analytics.whatif.replay import PolicyBasis, Variant, Window, Workload, run_variant
from preemptlens.analytics.whatif.tuning import context
from preemptlens.analytics.whatif.victim_order import compare
from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

SIM = SimConfig(cluster="sim", days=2.0, pools=(PoolSpec("a100", nodes=4),),
                policy=PolicyConfig(min_run_s=0.0, grace_s=60.0, requeue_hold_s=120.0))
WARMUP_S = 300.0
CONFIG = """
[tuning]
min_run_s = 0.0
grace_s = 60.0
requeue_hold_s = 120.0
may_preempt = { critical = ["high", "normal", "low"], high = ["normal", "low"] }
"""


def seeded_jobs(seed: int) -> list[JobSpec]:
    rng = random.Random(seed)
    jobs = [
        JobSpec(job_id=f"low{i}", tier="low", preemptible=True, pool="a100", gpus=1, team="batch",
                submit_s=float(rng.randrange(0, 1800, 60)), work_s=30 * 86400.0, warmup_s=WARMUP_S,
                checkpoint_interval_s=rng.choice([600.0, 1200.0, 1800.0, 3600.0, 7200.0, None]))
        for i in range(SIM.pools[0].gpus)
    ]
    jobs += [
        JobSpec(job_id=f"high{i}", tier="high", preemptible=False, pool="a100", gpus=1, team="prod",
                submit_s=float(rng.randrange(3600, int(SIM.horizon_s) - 7200, 60)),
                work_s=float(rng.randrange(1800, 7200, 60)))
        for i in range(40)
    ]
    return jobs


def truth(out: Outcome) -> dict[str, float]:
    """The report's figures straight from the simulator's truth tables and raw rows."""
    lost = truth_preemptions_frame(SIM, out)
    runs = job_runs_frame(SIM, out).filter(pl.col("run") == 1)
    jobs = jobs_frame(SIM, out).filter(pl.col("tier").is_in(["critical", "high"]))
    waits = jobs.join(runs, on="job_id").select(
        (pl.col("start_time") - pl.col("submit_time")).dt.total_microseconds() / 1e6
    ).to_series()
    assert waits.len() == jobs.height  # every high job started, so no wait is cut at the window's end
    return {
        "thrown_away_gpu_h": (lost["lost_gpu_s"] + lost["gpus"] * lost["warmup_s"]).sum() / 3600.0,
        "high_wait_median_s": waits.quantile(0.5, "linear"),
        "high_wait_p90_s": waits.quantile(0.9, "linear"),
        "victims_per_week": lost["victim_job_id"].n_unique() / (SIM.days / 7.0),
        "preemptions": lost.height,
    }


@pytest.fixture(scope="module")
def past(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, float]]]:
    """The warehouse of the past (today's order) and the truth of both orders."""
    jobs = seeded_jobs(5)
    outcomes = {order: simulate_jobs(jobs, SIM.pools, PolicyConfig(**{**vars(SIM.policy), "victim_order": order}),
                                     SIM.horizon_s) for order in ("priority", "cost")}
    root = tmp_path_factory.mktemp("victim_order")
    wh = load_outcome(root / "past.duckdb", SIM, outcomes["priority"])
    wh.close()
    return root / "past.duckdb", {order: truth(out) for order, out in outcomes.items()}


def suggest_output(path: Path, config: str, capsys: pytest.CaptureFixture[str]) -> str:
    toml = path.with_suffix(".toml")
    toml.write_text(config)
    start = SIM.start.isoformat()
    end = (SIM.start + timedelta(seconds=SIM.horizon_s)).isoformat()
    assert main(["--config", str(toml), "--warehouse", str(path), "suggest", "--cluster", "sim", "--start", start,
                 "--end", end, "--only", "not_yet", "--no-store"]) == 0
    return capsys.readouterr().out


def test_cost_order_loses_strictly_less_work_at_equal_preemptions(
    past: tuple[Path, dict[str, dict[str, float]]]
) -> None:
    _, truths = past
    today, cost = truths["priority"], truths["cost"]
    assert today["preemptions"] == cost["preemptions"] >= 20
    assert cost["thrown_away_gpu_h"] < today["thrown_away_gpu_h"]


def test_suggest_prints_both_orders_as_the_truth_has_them(
    past: tuple[Path, dict[str, dict[str, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, truths = past
    out = suggest_output(path, CONFIG, capsys)
    assert "reproduces the recorded window" in out
    rows = {line[3:34].strip(): line[34:].split() for line in out.splitlines() if line.startswith("   ")}
    expected = {
        "work thrown away (GPU-hours)": ("thrown_away_gpu_h", "{:,.1f}"),
        "critical+high wait, median (s)": ("high_wait_median_s", "{:,.0f}"),
        "critical+high wait, p90 (s)": ("high_wait_p90_s", "{:,.0f}"),
        "victims per week": ("victims_per_week", "{:,.1f}"),
        "preemptions": ("preemptions", "{:,.0f}"),
    }
    for label, (key, shape) in expected.items():
        assert rows[label] == [shape.format(truths["priority"][key]), shape.format(truths["cost"][key])], label


def test_the_comparison_can_be_turned_off(
    past: tuple[Path, dict[str, dict[str, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = past
    out = suggest_output(path, CONFIG + "[victim_order]\ncompare = false\n", capsys)
    assert "reproduces the recorded window" in out and "cost-aware" not in out


def test_both_columns_equal_the_truth_of_their_order(past: tuple[Path, dict[str, dict[str, float]]]) -> None:
    path, truths = past
    settings = default_settings(min_run_s=0.0, grace_s=60.0, requeue_hold_s=120.0,
                                may_preempt={"critical": ["high", "normal", "low"], "high": ["normal", "low"]})
    with Warehouse(path) as wh:
        window = Window("sim", SIM.start, SIM.start + timedelta(seconds=SIM.horizon_s))
        ctx = context(wh, window, settings)
    found = compare(ctx.workload, ctx.baseline)
    for order, figures in (("priority", found.today), ("cost", found.cost)):
        for key, value in truths[order].items():
            assert getattr(figures, key) == pytest.approx(value, rel=1e-9), (order, key)


def test_work_thrown_away_is_unknown_when_no_warm_up_was_measured() -> None:
    jobs = seeded_jobs(5)
    window = Window("sim", SIM.start, SIM.start + timedelta(seconds=SIM.horizon_s))
    workload = Workload(window, SIM.pools, tuple(jobs), PolicyBasis(SIM.policy, {}), {}, (),
                        warmup_measured=frozenset())
    found = compare(workload, run_variant(workload, Variant("today", SIM.policy)))
    assert found.today.preemptions > 0 and found.today.lost_gpu_h > 0
    assert found.today.thrown_away_gpu_h is None and found.cost.thrown_away_gpu_h is None
    assert "work thrown away (GPU-hours)    unknown (no warm-up measured)" in "\n".join(found.lines())
