"""The Alertmanager rule file: valid for promtool, its unit tests pass, and they cover firing and quiet series."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from preemptlens.dashboards.metrics import METRICS
from tests.metrics.metrics_e2e import Scraped, warehouse_rows

RULES_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "prometheus"
RULES = RULES_DIR / "preemptlens-rules.yml"
RULE_TESTS = RULES_DIR / "preemptlens-rules.test.yml"
ALERTS = {"PreemptionCostExceedsGain", "HighTierShareGrowing", "IdleHoardingHigh", "PreemptlensStale"}

if shutil.which("promtool") is None:
    pytest.skip("promtool (Debian package `prometheus`) is not installed; tests/run.sh installs it",
                allow_module_level=True)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=120, check=False)


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bpreemptlens_[a-z0-9_]+", expr))


def test_promtool_check_rules_passes() -> None:
    result = promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rules_name_only_exposed_metrics_and_carry_severity_and_annotations() -> None:
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    assert ALERTS <= {rule["alert"] for rule in rules}
    for rule in rules:
        names = metric_names(rule["expr"])
        assert names, rule["alert"]
        assert names <= set(METRICS), (rule["alert"], names - set(METRICS))
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_promtool_unit_tests_pass_and_cover_firing_and_quiet_cases() -> None:
    result = promtool("test", "rules", RULE_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    spec = yaml.safe_load(RULE_TESTS.read_text())
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in spec["tests"]:
        for series in case["input_series"]:
            assert metric_names(series["series"]) <= set(METRICS), series["series"]
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    assert ALERTS <= fired, "every alert has a case where it fires"
    assert ALERTS <= quiet, "every alert has a case where it stays quiet"


def test_promtool_unit_tests_would_catch_a_broken_rule(tmp_path: Path) -> None:
    # The tests are not vacuous: with a threshold that can never be met, they fail.
    rule = "preemptlens_net_benefit_gpu_hours < 0"
    broken = RULES.read_text().replace(rule, "preemptlens_net_benefit_gpu_hours < -1e9")
    assert broken != RULES.read_text()
    (tmp_path / RULES.name).write_text(broken)
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    result = subprocess.run(
        ["promtool", "test", "rules", RULE_TESTS.name], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "PreemptionCostExceedsGain" in result.stdout + result.stderr


@pytest.mark.slow
def test_rules_select_what_the_warehouse_says_on_the_scraped_series(scraped: Scraped) -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}
    for expr in rules.values():
        scraped.query(expr)  # every rule evaluates on real data (status success)

    def pools(expr: str) -> set[str]:
        return {s["metric"]["pool"] for s in scraped.query(expr)}

    week = warehouse_rows(
        scraped.warehouse,
        "SELECT pool, cost_weighted_gpu_s > gain_weighted_gpu_s AS loses FROM net_benefit "
        "WHERE period = 'week' AND team = '(all)' AND window_start = "
        "(SELECT date_trunc('week', max(data_end)) - INTERVAL 7 DAY FROM stg_runs)",
    )
    assert any(r["loses"] for r in week), "the simulated week has a pool where preemption does not pay"
    assert pools(rules["PreemptionCostExceedsGain"]) == {r["pool"] for r in week if r["loses"]}
    growth = warehouse_rows(
        scraped.warehouse,
        "SELECT t.pool, t.high_gpu_hour_share_slope AS slope, "
        "sum(w.gpu_hours) FILTER (WHERE w.tier IN ('critical', 'high')) / sum(w.gpu_hours) AS share "
        "FROM scope_creep_trend AS t INNER JOIN scope_creep_weekly AS w ON w.pool = t.pool "
        "WHERE w.week = (SELECT date_trunc('week', max(data_end)) - INTERVAL 7 DAY FROM stg_runs) "
        "GROUP BY t.pool, t.high_gpu_hour_share_slope",
    )
    assert pools(rules["HighTierShareGrowing"]) == {r["pool"] for r in growth if r["slope"] > 0.02 and r["share"] > 0.2}
    idle = warehouse_rows(
        scraped.warehouse,
        "SELECT r.pool, coalesce(i.idle, 0) / r.allocated AS share FROM "
        "(SELECT pool, sum(gpus * effective_s) / 3600.0 AS allocated FROM stg_runs GROUP BY pool) AS r "
        "LEFT JOIN (SELECT pool, sum(idle_gpu_hours) AS idle FROM idle_hoarding_runs GROUP BY pool) AS i "
        "USING (pool)",
    )
    assert pools(rules["IdleHoardingHigh"]) == {r["pool"] for r in idle if r["share"] > 0.10}
    # serve's analyze took every load in and the snapshot reads: neither freshness alert has anything.
    assert scraped.query(rules["PreemptlensStale"]) == []
    assert scraped.query(rules["PreemptlensFiguresUnreadable"]) == []
