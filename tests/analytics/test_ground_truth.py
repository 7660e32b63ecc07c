"""The analytics against the simulator's ground truth.

The views see only the raw tables the simulator wrote; the simulator also
recorded what really happened (sim_truth_*). The two must agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from analytics_scenario import simulated_and_analysed

from preemptlens.analytics.simulator import DEMO, PolicyConfig, PoolSpec, SimConfig
from preemptlens.warehouse import Warehouse

SIM = SimConfig(
    cluster="truth",
    start=datetime(2026, 10, 5, tzinfo=UTC),
    days=5.0,
    pools=(PoolSpec("a100", nodes=12),),
    workload=dataclasses.replace(DEMO.workload, seed=11, load=0.95, hoarding_share=0.12),
)


@pytest.fixture(scope="module")
def truth_wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    with simulated_and_analysed(tmp_path_factory.mktemp("truth") / "w.duckdb", SIM) as wh:
        yield wh


def ledger_vs_truth(wh: Warehouse) -> pl.DataFrame:
    return wh.query(
        """
        SELECT t.victim_job_id, t.victim_run, t.lost_gpu_s AS true_lost, l.lost_gpu_s AS lost, l.basis,
               t.requeue_delay_s AS true_delay, l.requeue_delay_s AS delay, l.requeue_censored,
               t.restart_time AS true_restart, t.preemptor_job_id AS true_preemptor, l.preemptor_job_id,
               t.gpus AS true_gpus, l.victim_gpus, t.warmup_s AS true_warmup, l.warmup_s
        FROM sim_truth_preemptions t
        LEFT JOIN preemption_ledger l
          ON l.cluster = t.cluster AND l.victim_job_id = t.victim_job_id AND l.victim_run = t.victim_run
        """
    )


def test_every_preemption_is_in_the_ledger_once(truth_wh: Warehouse) -> None:
    truth = truth_wh.query("SELECT count(*) AS n FROM sim_truth_preemptions")["n"][0]
    ledger = truth_wh.query(
        "SELECT count(*) AS n, count(DISTINCT (victim_job_id, victim_run)) AS d FROM preemption_ledger"
    )
    assert truth > 30, "the scenario must preempt enough to be a test"
    assert ledger["n"][0] == ledger["d"][0] == truth


def test_lost_gpu_seconds_exact_where_checkpoints_are_recorded(truth_wh: Warehouse) -> None:
    rows = ledger_vs_truth(truth_wh)
    measured = rows.filter(pl.col("basis") == "checkpoint")
    assert measured.height > 10
    assert (measured["lost"] - measured["true_lost"]).abs().max() < 1e-6
    # Jobs that never checkpoint report their step (every 10 minutes from the run's start): their restart
    # resumes from step 0, which the run reached at its start, so by rollback everything since then is lost;
    # the truth agrees. Without a restart that reported a step, everything since the start is assumed lost.
    rolled = rows.filter(pl.col("basis") == "rollback")
    assert rolled.height > 10
    unmeasured = rows.filter(pl.col("basis").is_in(["rollback", "assumed"]))
    assert (unmeasured["lost"] - unmeasured["true_lost"]).abs().max() < 1e-6


def test_requeue_delay_preemptor_and_gpus_exact(truth_wh: Warehouse) -> None:
    rows = ledger_vs_truth(truth_wh)
    restarted = rows.filter(pl.col("true_restart").is_not_null())
    assert (restarted["delay"] - restarted["true_delay"]).abs().max() < 1e-6
    assert not restarted["requeue_censored"].any()
    never = rows.filter(pl.col("true_restart").is_null())
    assert never["requeue_censored"].all()
    assert rows.filter(pl.col("preemptor_job_id") != pl.col("true_preemptor")).height == 0
    assert rows.filter(pl.col("victim_gpus") != pl.col("true_gpus")).height == 0


def test_warmup_measured_from_progress_reports(truth_wh: Warehouse) -> None:
    rows = ledger_vs_truth(truth_wh).filter(pl.col("warmup_s").is_not_null())
    assert rows.height > 10
    # Progress is reported every 10 minutes; the warm-up is recovered from their rate exactly.
    assert (rows["warmup_s"] - rows["true_warmup"]).abs().max() < 1.0


def test_hoarded_gpu_hours_within_two_percent(truth_wh: Warehouse) -> None:
    window_s = 1800
    truth = truth_wh.query(
        "SELECT sum(idle_gpu_s) / 3600 AS h FROM sim_truth_hoarding WHERE epoch(idle_end) - epoch(idle_start) >= $w",
        {"w": window_s},
    )["h"][0]
    measured = truth_wh.query("SELECT sum(idle_gpu_hours) AS h FROM idle_hoarding_runs")["h"][0]
    assert truth > 10
    assert abs(measured - truth) / truth < 0.02


def test_no_minimum_run_time_shows_in_early_victims(tmp_path: Path) -> None:
    """A policy with a minimum run time leaves no early victims; one without it has some."""
    counts = {}
    for min_run in (0.0, 1800.0):
        sim = dataclasses.replace(
            SIM, days=3.0, cluster=f"minrun{int(min_run)}", policy=PolicyConfig(min_run_s=min_run)
        )
        with simulated_and_analysed(tmp_path / f"{int(min_run)}.duckdb", sim) as wh:
            counts[min_run] = wh.query(
                "SELECT count(*) FILTER (WHERE run_age_s < 1800) AS young, count(*) AS n FROM preemption_ledger"
            ).row(0)
    assert counts[0.0][0] > 0
    assert counts[1800.0][0] == 0 and counts[1800.0][1] > 0


def test_net_benefit_weeks_add_up_to_days_and_to_the_ledger(truth_wh: Warehouse) -> None:
    ledger = truth_wh.query("SELECT sum(lost_gpu_s) AS lost, count(*) AS n FROM preemption_ledger").row(0)
    for period in ("day", "week"):
        total = truth_wh.query(
            "SELECT sum(lost_gpu_s) AS lost, sum(preemptions) AS n FROM net_benefit "
            "WHERE period = $p AND team = '(all)'",
            {"p": period},
        ).row(0)
        assert total[0] == pytest.approx(ledger[0])
        assert total[1] == ledger[1]
    teams = truth_wh.query(
        "SELECT window_start, pool, sum(cost_weighted_gpu_s) AS c FROM net_benefit "
        "WHERE period = 'week' AND team <> '(all)' GROUP BY ALL"
    )
    pools = truth_wh.query(
        "SELECT window_start, pool, cost_weighted_gpu_s AS c FROM net_benefit WHERE period = 'week' AND team = '(all)'"
    )
    joined = teams.join(pools, on=["window_start", "pool"], suffix="_all")
    assert joined.height == pools.height > 0
    assert (joined["c"] - joined["c_all"]).abs().max() < 1e-6
