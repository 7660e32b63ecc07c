"""Scope creep, net benefit, pilot figures, the scorecard and `preemptlens analyze`.

Pool p (100 GPUs), four weeks: team A submits ten 1-GPU one-hour jobs a week,
k+1 of them high in week k (k = 0..3); team B ten normal ones. The high share
of the pool's GPU-hours is (k+1)/20: a slope of 0.05 a week, all from team A.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from analytics_scenario import Scenario

from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

WEEK = 7 * 86400


def build(sc: Scenario) -> None:
    sc.pool("p", 100)
    for week in range(4):
        for i in range(10):
            for team in ("A", "B"):
                job = f"{team}{week}-{i}"
                tier = "high" if team == "A" and i <= week else "normal"
                t = week * WEEK + i * 3600
                sc.job(job, tier, 1, "p", t - 600, team=team)
                sc.run(job, 1, 1, "p", t, t + 3600, "completed")
    # one job's progress report: checkpoint data was collected and no job checkpoints, so Q3 is a measured no
    sc.checkpoint("B0-0", 1, 1800, 50.0, kind="progress")


@pytest.fixture
def built(sc: Scenario) -> Scenario:
    build(sc)
    sc.analyze()
    return sc


def test_weekly_tier_shares(built: Scenario) -> None:
    weekly = built.view("scope_creep_weekly", "week, team, tier")
    a_week2 = weekly.filter((pl.col("team") == "A") & (pl.col("tier") == "high")).row(2, named=True)
    assert (a_week2["jobs"], a_week2["job_share"], a_week2["gpu_hour_share"]) == (3, 0.3, pytest.approx(0.3))


def test_trend_and_who_drives_it(built: Scenario) -> None:
    trend = built.view("scope_creep_trend", "pool").row(0, named=True)
    assert trend["weeks"] == 4
    assert trend["high_gpu_hour_share_slope"] == pytest.approx(0.05)
    assert (trend["high_gpu_hour_share_first"], trend["high_gpu_hour_share_last"]) == (
        pytest.approx(0.05),
        pytest.approx(0.2),
    )
    teams = built.view("scope_creep_teams", "growth_rank")
    assert teams.select("team", "growth_rank").rows() == [("A", 1), ("B", 2)]
    assert teams["high_share_slope"].to_list() == [pytest.approx(0.05), pytest.approx(0.0)]
    assert teams["share_of_pool_growth"][0] == pytest.approx(1.0)


def test_scorecard_answers_from_evidence(built: Scenario) -> None:
    evidence = {r["measure"]: r for r in built.view("readiness_evidence", "measure").to_dicts()}
    assert evidence["high_gpu_hour_share"]["value"] == pytest.approx(10 / 80)
    assert evidence["high_share_weekly_slope_abs"]["value"] == pytest.approx(0.05)
    assert evidence["high_share_weekly_slope_abs"]["passes"] is False
    # 100 GPUs, at most 2 busy: no queue; but without GPU samples hoarding is unknown, so how busy the GPUs
    # really were is unknown too: never a measured 0
    assert evidence["queue_pressure_hours_share"]["value"] == 0
    assert evidence["busy_hours_share"]["value"] is None
    assert evidence["busy_hours_share"]["missing"] == "no GPU samples: hoarding unknown"
    assert evidence["hoarded_share_of_allocated"]["value"] is None
    assert evidence["hoarded_share_of_allocated"]["passes"] is None
    # every job waited 600 s before its start: short of an hour in the queue, and nothing waited in any hour
    assert evidence["queued_gpu_wait_s"]["value"] == 600
    assert evidence["queued_gpu_wait_s"]["passes"] is False
    # no preemptions: Q4 cannot be measured
    assert evidence["visibility"]["value"] is None
    assert evidence["visibility"]["missing"] == "no preemptions: visibility unknown"
    card = built.view("readiness_scorecard", "question_no")
    # Q1: how busy the GPUs were is unknown, but no alternative can pass (no queue pressure, short waits): no
    assert card["answer"].to_list() == [False, False, False, None]
    assert card["missing"][0] is None
    first = card.row(0, named=True)
    assert (first["yes_count"], first["no_count"], first["unknown_count"]) == (0, 3, 1)
    (verdict,) = built.view("readiness_verdict", "cluster").to_dicts()
    assert verdict["verdict"] == "preemption should not be the main tool"
    # each measured no names its own fix, in question order before suggest has ranked them; nothing is fixed on
    # the strength of the unknown hoarding (no "reclaim idle GPUs")
    assert verdict["fix_first"] == "quotas and tiered pools, tier limits, checkpoints"
    assert first["unanswered"] == "Q4"
    assert first["collect"] == "no GPU samples: hoarding unknown; no preemptions: visibility unknown"


def test_net_benefit_flags_cost_over_gain(sc: Scenario) -> None:
    sc.pool("q", 4)
    sc.job("v", "low", 4, "q", -60, team="victims", checkpoint_interval_s=600.0, work_s=4000.0)
    sc.run("v", 1, 4, "q", 0, 1000, "preempted", preemptor_job_id="p", reason="prio")
    sc.run("v", 2, 4, "q", 1100, 4400, "completed")
    sc.job("p", "critical", 4, "q", 990, team="prod")
    sc.run("p", 1, 4, "q", 1000, 1100, "completed")
    sc.analyze()
    nb = {r["team"]: r for r in sc.view("net_benefit WHERE period = 'day'", "team").to_dicts()}
    # without preemption p waits for v's remaining 3000 s of work: gain 4 x 3000, weight 4
    assert nb["prod"]["gain_weighted_gpu_s"] == pytest.approx(4 * 3000 * 4.0)
    # cost: lost 4 x 300 (declared, half the interval) + requeue 4 x 100, weight 0.5
    assert nb["victims"]["cost_weighted_gpu_s"] == pytest.approx((4 * 300 + 4 * 100) * 0.5)
    assert nb["(all)"]["net_weighted_gpu_s"] == pytest.approx(48000 - 800)
    assert nb["(all)"]["cost_exceeds_gain"] is False
    assert nb["victims"]["cost_exceeds_gain"] is True
    assert nb["(all)"]["gains_unknown"] == 0
    pilot = sc.view("pool_pilot_figures", "pool").row(0, named=True)
    assert (pilot["high_wait_p50_s"], pilot["retries_per_job"], pilot["preemptions"]) == (10, 0.5, 1)


def test_cost_over_an_unknown_gain_is_not_a_loss(sc: Scenario) -> None:
    # The scheduler names no preemptor: the gain is unknown, so "cost exceeds gain" is unknown too, not true.
    sc.pool("q", 4)
    sc.job("v", "low", 4, "q", -60, team="victims", checkpoint_interval_s=600.0, work_s=4000.0)
    sc.run("v", 1, 4, "q", 0, 1000, "preempted")
    sc.run("v", 2, 4, "q", 1100, 4400, "completed")
    sc.analyze()
    nb = {r["team"]: r for r in sc.view("net_benefit", "team").filter(pl.col("period") == "day").to_dicts()}
    assert nb["(all)"]["gain_weighted_gpu_s"] == 0 and nb["(all)"]["cost_weighted_gpu_s"] > 0
    assert nb["(all)"]["gains_unknown"] == 1
    assert nb["(all)"]["cost_exceeds_gain"] is None
    weekly = sc.view("net_benefit", "team").filter((pl.col("period") == "week") & (pl.col("team") == "(all)"))
    assert weekly["cost_exceeds_gain"][0] is None


def test_analyze_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        sc = Scenario(wh)
        build(sc)
        sc.load()
    assert main(["--warehouse", str(path), "analyze"]) == 0
    out = capsys.readouterr().out
    assert "idle stretches: full refresh" in out
    assert "Q2 Are priorities clear and narrow? no" in out
    assert "Q1 Are GPUs scarce for long stretches (not just at peaks)? no" in out
    assert (
        "verdict: preemption should not be the main tool (0 yes, 3 no, 1 unknown of 4); fix first: quotas and "
        "tiered pools, tier limits, checkpoints" in out
    )
    assert "to answer the rest, collect: no GPU samples: hoarding unknown; no preemptions: visibility unknown" \
        in out
    assert main(["--warehouse", str(path), "analyze", "--quiet"]) == 0
    assert "nothing changed since the analyze of" in capsys.readouterr().out
    assert main(["--warehouse", str(path), "analyze", "--quiet", "--full"]) == 0
    assert "idle stretches: full refresh" in capsys.readouterr().out
