"""The analytics alert rules on a simulated cluster whose truth the test knows."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from preemptlens.analytics import alerts
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import DEMO, PoolSpec, SimConfig, simulate_into
from preemptlens.analytics.simulator.model import TeamSpec
from preemptlens.config import Config, load_config
from preemptlens.warehouse import Warehouse

START = datetime(2026, 10, 5, tzinfo=UTC)
SIM = SimConfig(
    cluster="alerts",
    start=START,
    days=21.0,
    pools=(PoolSpec("a100", nodes=6),),
    # One team claims ever more high priority; the other does not.
    workload=dataclasses.replace(
        DEMO.workload,
        seed=5,
        hoarding_share=0.15,
        teams=(TeamSpec("growing", 2.0, high_share_growth=0.15), TeamSpec("steady", 1.0), TeamSpec("infra", 1.0)),
    ),
)
END = START + timedelta(days=SIM.days)


@pytest.fixture(scope="module")
def sim_wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    path = tmp_path_factory.mktemp("rules") / "w.duckdb"
    with Warehouse(path) as wh:
        simulate_into(wh, SIM)
        analyze(wh, load_config(overrides={"warehouse.path": str(path)}).of(AnalyticsSettings))
        yield wh


def config(tmp_path: Path, **alert_settings: object) -> Config:
    overrides: dict[str, object] = {"warehouse.path": str(tmp_path / "unused.duckdb")}
    overrides.update({f"alerts.{k}": v for k, v in alert_settings.items()})
    return load_config(overrides=overrides)


def test_cost_exceeds_gain_alerts_the_finished_days_that_lost(sim_wh: Warehouse, tmp_path: Path) -> None:
    cfg = config(tmp_path, lookback_s=7 * 86400.0)
    now = END
    found = alerts.CostExceedsGain().evaluate(sim_wh, cfg, now)
    # Recompute the losing days from the ledger and the tier weights, independently of the view.
    weights = cfg.of(AnalyticsSettings).tier_weights
    ledger = sim_wh.query("SELECT * FROM preemption_ledger")
    per_day = (
        ledger.with_columns(pl.col("time").dt.truncate("1d").alias("day"))
        .with_columns(
            (
                (pl.col("lost_gpu_s") + pl.col("requeue_gpu_s") + pl.col("warmup_gpu_s"))
                * pl.col("victim_tier").replace_strict(weights, return_dtype=pl.Float64)
            ).alias("cost"),
            (
                pl.col("gain_gpu_s").fill_null(0.0)
                * pl.col("preemptor_tier").replace_strict(weights, default=0.0, return_dtype=pl.Float64)
            ).alias("gain"),
        )
        .group_by("pool", "day")
        .agg(pl.sum("cost"), pl.sum("gain"), pl.col("gain_gpu_s").is_null().sum().alias("unknown"))
        .filter(
            # a day with gains unknown is not known to have lost
            (pl.col("cost") > pl.col("gain"))
            & (pl.col("unknown") == 0)
            & (pl.col("day") + timedelta(days=1) <= now)
            & (pl.col("day") + timedelta(days=1) > now - timedelta(days=7))
        )
    )
    expected = {f"cost_exceeds_gain:alerts:{p}:{d:%Y-%m-%d}" for p, d in per_day.select("pool", "day").iter_rows()}
    assert expected, "the scenario must have losing days"
    assert {a.dedupe_key for a in found} == expected
    assert all(a.target == alerts.PLATFORM and "GPU-h" in a.text for a in found)


def test_scope_creep_fires_on_growth_only_above_the_limit(sim_wh: Warehouse, tmp_path: Path) -> None:
    slope = sim_wh.query("SELECT high_gpu_hour_share_slope AS s FROM scope_creep_trend")["s"][0]
    assert slope > 0.005, "the simulated workload grows its high-tier share"
    below = alerts.ScopeCreep().evaluate(sim_wh, config(tmp_path, scope_creep_slope=slope / 2), END)
    above = alerts.ScopeCreep().evaluate(sim_wh, config(tmp_path, scope_creep_slope=slope * 2), END)
    assert [a.dedupe_key for a in below] == [f"scope_creep:alerts:a100:{END:%G-W%V}"]
    assert above == []


def test_idle_hoarding_per_team_against_the_truth(sim_wh: Warehouse, tmp_path: Path) -> None:
    lookback = 3 * 86400.0
    truth = sim_wh.query(
        "SELECT j.team, sum(h.idle_gpu_s) / 3600 AS hours FROM sim_truth_hoarding h "
        "JOIN jobs j USING (cluster, job_id) "
        "WHERE epoch(h.idle_end) - epoch(h.idle_start) >= 1800 AND h.idle_end > $since "
        "GROUP BY j.team ORDER BY hours DESC",
        {"since": END - timedelta(seconds=lookback)},
    )
    assert truth.height >= 2
    # A limit between the top team and the next: exactly the top team is reported.
    top, second = truth["hours"][0], truth["hours"][1]
    assert top > second * 1.05
    found = alerts.IdleHoarding().evaluate(
        sim_wh, config(tmp_path, lookback_s=lookback, hoarding_gpu_hours=(top + second) / 2), END
    )
    assert [a.facts["team"] for a in found] == [truth["team"][0]]
    assert found[0].facts["idle_gpu_hours"] == pytest.approx(top, rel=0.02)


def test_rules_are_recorded_once(sim_wh: Warehouse, tmp_path: Path) -> None:
    cfg = config(tmp_path, lookback_s=7 * 86400.0, scope_creep_slope=0.0, hoarding_gpu_hours=1.0)
    rules = [alerts.RULES[n] for n in ("cost_exceeds_gain", "scope_creep", "idle_hoarding")]
    target = alerts.Target(alerts.PLATFORM, alerts.Secret("http://127.0.0.1:9/unused"))
    first = alerts.evaluate(sim_wh, cfg, {alerts.PLATFORM: target}, END, rules)
    assert first > 2
    assert alerts.evaluate(sim_wh, cfg, {alerts.PLATFORM: target}, END, rules) == 0
    sim_wh.con.execute("DELETE FROM alerts")
