"""End to end: `preemptlens serve` exposes /metrics, a real Prometheus scrapes it every second,
and what Prometheus holds equals the figures the warehouse says, computed here by SQL of our own."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from preemptlens.dashboards.metrics import METRICS, OTHER_TEAMS, PER_JOB
from tests.metrics.metrics_e2e import CLUSTER, TEAMS, TOKEN, TOP_TEAMS, WEBHOOK, Scraped, warehouse_rows

pytestmark = pytest.mark.slow


def scraped_values(scraped: Scraped, metric: str, *labels: str) -> dict[tuple[str, ...], float]:
    found = {}
    for series in scraped.query(metric):
        key = tuple(series["metric"][label] for label in labels)
        assert key not in found, f"{metric}: two series for {key}"
        found[key] = float(series["value"][1])
    return found


def assert_close(got: dict[tuple[str, ...], float], want: dict[tuple[str, ...], float], what: str) -> None:
    assert got.keys() == want.keys(), what
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-9), (what, key, got[key], value)


def last_complete_week(path: Path) -> Any:
    (row,) = warehouse_rows(
        path,
        "SELECT date_trunc('week', max(data_end)) - INTERVAL 7 DAY AS w FROM stg_runs WHERE cluster = $c",
        {"c": CLUSTER},
    )
    return row["w"]


def folded(per_team: dict[tuple[str, str, str], tuple[float, ...]]) -> dict[tuple[str, str, str], tuple[float, ...]]:
    """The test's own top-N folding: largest first value (ties by name) keep their team, the rest sum up."""
    by_pool: dict[tuple[str, str], list[tuple[str, tuple[float, ...]]]] = defaultdict(list)
    for (cluster, pool, team), values in per_team.items():
        by_pool[(cluster, pool)].append((team, values))
    result: dict[tuple[str, str, str], tuple[float, ...]] = {}
    for (cluster, pool), teams in by_pool.items():
        teams.sort(key=lambda item: (-item[1][0], item[0]))
        for rank, (team, values) in enumerate(teams):
            label = team if rank < TOP_TEAMS else OTHER_TEAMS
            before = result.get((cluster, pool, label), (0.0,) * len(values))
            result[(cluster, pool, label)] = tuple(a + b for a, b in zip(before, values, strict=True))
    return result


def test_serve_ran_and_stopped_cleanly(scraped: Scraped) -> None:
    assert scraped.serve_status == 0, scraped.serve_log
    assert "metrics on 127.0.0.1:" in scraped.serve_log
    assert "job analyze done" in scraped.serve_log
    assert "stopped" in scraped.serve_log.splitlines()[-1]
    # Prometheus scraped the target successfully.
    assert scraped_values(scraped, 'up{job="preemptlens"}') == {(): 1.0}


def test_net_benefit_is_the_last_complete_week(scraped: Scraped) -> None:
    week = last_complete_week(scraped.warehouse)
    rows = warehouse_rows(
        scraped.warehouse,
        "SELECT pool, window_start, gain_weighted_gpu_s, cost_weighted_gpu_s, net_weighted_gpu_s FROM net_benefit "
        "WHERE period = 'week' AND team = '(all)'",
    )
    pools = {r["pool"] for r in rows}
    this_week = {r["pool"]: r for r in rows if r["window_start"] == week}
    assert this_week, "the simulated week has preemptions"
    for metric, column in (
        ("preemptlens_net_benefit_gpu_hours", "net_weighted_gpu_s"),
        ("preemptlens_preemption_gain_gpu_hours", "gain_weighted_gpu_s"),
        ("preemptlens_preemption_cost_gpu_hours", "cost_weighted_gpu_s"),
    ):
        want = {(CLUSTER, p): (this_week[p][column] / 3600 if p in this_week else 0.0) for p in pools}
        assert_close(scraped_values(scraped, metric, "cluster", "pool"), want, metric)
    window = scraped_values(scraped, "preemptlens_weekly_window_start_timestamp_seconds", "cluster")
    assert window == {(CLUSTER,): week.timestamp()}


def test_lost_gpu_hours_and_preemptions_fold_teams_beyond_the_bound(scraped: Scraped) -> None:
    rows = warehouse_rows(
        scraped.warehouse,
        "SELECT cluster, pool, victim_team, lost_gpu_s FROM preemption_ledger",
    )
    per_team: dict[tuple[str, str, str], tuple[float, ...]] = defaultdict(lambda: (0.0, 0.0))
    for r in rows:
        key = (r["cluster"], r["pool"], r["victim_team"])
        lost, count = per_team[key]
        per_team[key] = (lost + r["lost_gpu_s"] / 3600, count + 1)
    assert max(len({k[2] for k in per_team if k[1] == pool}) for pool in {k[1] for k in per_team}) > TOP_TEAMS
    want = folded(per_team)
    labels = ("cluster", "pool", "team")
    assert_close(
        scraped_values(scraped, "preemptlens_lost_gpu_hours", *labels), {k: v[0] for k, v in want.items()}, "lost"
    )
    assert_close(
        scraped_values(scraped, "preemptlens_preemptions", *labels), {k: v[1] for k, v in want.items()}, "count"
    )
    # Folding loses nothing: the pool totals are the ledger's.
    total = scraped.query("sum(preemptlens_preemptions)")
    assert float(total[0]["value"][1]) == len(rows)


def test_requeue_delay_quantiles_of_the_week(scraped: Scraped) -> None:
    week = last_complete_week(scraped.warehouse)
    rows = warehouse_rows(
        scraped.warehouse,
        "SELECT pool, time, requeue_delay_s, requeue_censored FROM preemption_ledger",
    )
    delays: dict[str, list[float]] = defaultdict(list)
    censored: dict[str, int] = defaultdict(int)
    seen: set[str] = set()
    for r in rows:
        if week <= r["time"] < week + timedelta(days=7):
            seen.add(r["pool"])
            if r["requeue_censored"]:
                censored[r["pool"]] += 1
            else:
                delays[r["pool"]].append(r["requeue_delay_s"])

    def quantile(values: list[float], q: float) -> float:
        # Linear interpolation between order statistics (the definition of quantile_cont).
        ordered = sorted(values)
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    want = {
        (CLUSTER, pool, f"{q:g}"): quantile(values, q) for pool, values in delays.items() for q in (0.5, 0.9, 0.99)
    }
    assert want
    got = scraped_values(scraped, "preemptlens_requeue_delay_seconds", "cluster", "pool", "quantile")
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-6), (key, got[key], value)
    assert got.keys() == want.keys()
    observed = scraped_values(scraped, "preemptlens_requeue_delay_observed_preemptions", "cluster", "pool")
    assert observed == {(CLUSTER, p): float(len(delays[p])) for p in seen}
    waiting = scraped_values(scraped, "preemptlens_requeue_censored_preemptions", "cluster", "pool")
    assert waiting == {(CLUSTER, p): float(censored[p]) for p in seen}


def test_idle_hoarded_and_allocated_gpu_hours(scraped: Scraped) -> None:
    allocated = warehouse_rows(
        scraped.warehouse,
        "SELECT cluster, pool, team, gpus * effective_s / 3600.0 AS h FROM stg_runs",
    )
    idle = warehouse_rows(scraped.warehouse, "SELECT cluster, pool, team, idle_gpu_hours FROM idle_hoarding_runs")
    per_team: dict[tuple[str, str, str], tuple[float, ...]] = defaultdict(lambda: (0.0, 0.0))
    for r in idle:
        key = (r["cluster"], r["pool"], r["team"])
        per_team[key] = (per_team[key][0] + r["idle_gpu_hours"], per_team[key][1])
    for r in allocated:
        key = (r["cluster"], r["pool"], r["team"])
        per_team[key] = (per_team[key][0], per_team[key][1] + r["h"])
    assert any(v[0] > 0 for v in per_team.values()), "the simulation hoards"
    want = folded(per_team)
    labels = ("cluster", "pool", "team")
    got_idle = scraped_values(scraped, "preemptlens_idle_hoarded_gpu_hours", *labels)
    got_allocated = scraped_values(scraped, "preemptlens_allocated_gpu_hours", *labels)
    for key, (idle_h, allocated_h) in want.items():
        assert math.isclose(got_idle[key], idle_h, rel_tol=1e-9, abs_tol=1e-9), key
        assert math.isclose(got_allocated[key], allocated_h, rel_tol=1e-9, abs_tol=1e-9), key
    assert got_idle.keys() == got_allocated.keys() == want.keys()


def test_high_tier_share_and_its_slope(scraped: Scraped) -> None:
    week = last_complete_week(scraped.warehouse)
    rows = warehouse_rows(scraped.warehouse, "SELECT week, pool, tier, gpu_hours FROM scope_creep_weekly")
    high: dict[str, float] = defaultdict(float)
    total: dict[str, float] = defaultdict(float)
    for r in rows:
        if r["week"] == week:
            total[r["pool"]] += r["gpu_hours"]
            if r["tier"] in ("critical", "high"):
                high[r["pool"]] += r["gpu_hours"]
    want = {(CLUSTER, p): high[p] / total[p] for p in total if total[p] > 0}
    assert want
    assert_close(scraped_values(scraped, "preemptlens_high_tier_share", "cluster", "pool"), want, "share")
    slopes = warehouse_rows(
        scraped.warehouse, "SELECT cluster, pool, high_gpu_hour_share_slope AS s FROM scope_creep_trend"
    )
    assert_close(
        scraped_values(scraped, "preemptlens_high_tier_share_weekly_slope", "cluster", "pool"),
        {(r["cluster"], r["pool"]): r["s"] for r in slopes if r["s"] is not None},
        "slope",
    )


def test_readiness_answers(scraped: Scraped) -> None:
    rows = warehouse_rows(scraped.warehouse, "SELECT cluster, question_no, answer, yes_count FROM readiness_scorecard")
    assert len(rows) == 4
    got = scraped_values(scraped, "preemptlens_readiness", "cluster", "question")
    known = scraped_values(scraped, "preemptlens_readiness_known", "cluster", "question")
    for r in rows:
        key = (r["cluster"], str(r["question_no"]))
        # an unknown answer is NaN with known = 0, never a 0 that reads as "no"
        if r["answer"] is None:
            assert math.isnan(got[key]) and known[key] == 0.0
        else:
            assert got[key] == float(r["answer"]) and known[key] == 1.0
    assert scraped_values(scraped, "preemptlens_readiness_yes", "cluster") == {
        (CLUSTER,): float(sum(1 for r in rows if r["answer"]))
    }
    assert scraped_values(scraped, "preemptlens_readiness_unknown", "cluster") == {
        (CLUSTER,): float(sum(1 for r in rows if r["answer"] is None))
    }


def test_freshness_follows_serves_own_analyze(scraped: Scraped) -> None:
    (state,) = warehouse_rows(
        scraped.warehouse,
        "SELECT epoch(max(updated_at)) AS analyzed FROM analytics_state",
    )
    (mark,) = warehouse_rows(scraped.warehouse, "SELECT epoch(max(updated_at)) AS t FROM _watermarks")
    (end,) = warehouse_rows(scraped.warehouse, "SELECT epoch(max(data_end)) AS t FROM stg_runs")
    assert scraped_values(scraped, "preemptlens_last_analyze_timestamp_seconds") == {(): state["analyzed"]}
    # serve's analyze took in the watermark's load, which was committed after the fixture's analyze.
    assert state["analyzed"] >= mark["t"]
    assert scraped_values(scraped, "preemptlens_unanalyzed_loads") == {(): 0.0}
    assert scraped.query("preemptlens_oldest_unanalyzed_load_timestamp_seconds") == []
    assert scraped_values(scraped, "preemptlens_collector_last_batch_timestamp_seconds", "collector", "cluster") == {
        ("probe", CLUSTER): mark["t"]
    }
    assert scraped_values(scraped, "preemptlens_data_end_timestamp_seconds", "cluster") == {(CLUSTER,): end["t"]}
    assert scraped_values(scraped, "preemptlens_snapshot_readable") == {(): 1.0}


def test_cardinality_is_bounded(scraped: Scraped) -> None:
    pools = {k[1] for k in scraped_values(scraped, "preemptlens_allocated_gpu_hours", "cluster", "pool", "team")}
    assert pools
    by_team = ("preemptlens_lost_gpu_hours", "preemptlens_idle_hoarded_gpu_hours", "preemptlens_allocated_gpu_hours")
    for metric in by_team:
        per_pool = scraped.query(f"count by (cluster, pool) ({metric})")
        assert per_pool
        assert all(float(s["value"][1]) <= TOP_TEAMS + 1 for s in per_pool), metric
        assert len(scraped.query(f'{metric}{{team="{OTHER_TEAMS}"}}')) == len(per_pool), metric
    teams_seen = {s["metric"]["team"] for s in scraped.query("preemptlens_allocated_gpu_hours")}
    assert len(teams_seen) < TEAMS
    # Everything preemptlens exposes, whatever the number of teams: a fixed count per pool and cluster.
    total = float(scraped.query('count({__name__=~"preemptlens_.*"})')[0]["value"][1])
    per_pool = 7 + 3 + 4 * (TOP_TEAMS + 1)  # (cluster, pool) gauges, three quantiles, four families by team
    # week start, four readiness answers, whether each is known and whether it is borderline, two tallies, data
    # end; the verdict and whether it is borderline, the counterfactual net's three bounds and its break-even
    per_cluster = 16 + 2 + 3 + 1
    overall = 5 + 1  # freshness and snapshot gauges, and the one collector's watermark
    assert total <= len(pools) * per_pool + per_cluster + overall


def test_every_exposed_family_is_documented_and_no_secret_is_exposed(scraped: Scraped) -> None:
    families = set(re.findall(r"^# TYPE (\S+) ", scraped.exposition, flags=re.MULTILINE))
    # Without serve.metrics_token the scrape gets the aggregates only (tests/metrics/test_listener.py).
    assert families == set(METRICS) - PER_JOB
    docs = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    for name in METRICS:
        assert f"`{name}`" in docs, f"{name} is not in docs/metrics.md"
    for secret in (TOKEN, WEBHOOK, "s3cr3t"):
        assert secret not in scraped.exposition
        assert secret not in scraped.serve_log
    # Every label value comes from the data's names, never from the configuration.
    labels = {v for s in scraped.query('{__name__=~"preemptlens_.*"}') for v in s["metric"].values()}
    assert not any("hooks.example" in v or "tok-" in v for v in labels)
