"""The pilot's parts on their own: the simulator's policy schedule, declarations, the bootstrap's sums,
and the command, alert rule and weekly report on a simulated pilot."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from pilot_scenario import HARMFUL

from preemptlens.analytics import alerts
from preemptlens.analytics.pilot import (
    Figure,
    Pilot,
    PilotSettings,
    _Cell,
    _Draws,
    _quantile_reps,
    _ratio_reps,
    decide,
    declared,
    on_cluster,
)
from preemptlens.analytics.simulator import PolicyChange, PolicyConfig, PoolSpec, SimConfig, simulate
from preemptlens.analytics.whatif.scorecard import verdict_line
from preemptlens.cli import main
from preemptlens.config import Secret, load_config
from preemptlens.dashboards import report
from preemptlens.dashboards.data import reader
from preemptlens.errors import ConfigError
from preemptlens.reading.masking import EVERYTHING
from preemptlens.warehouse import Warehouse

DAY = 86400.0
TINY = SimConfig(cluster="tiny", days=4.0, pools=(PoolSpec("a", 2), PoolSpec("b", 2)),
                 policy=PolicyConfig(enabled=False))


def test_a_scheduled_change_acts_only_in_its_pools_and_from_its_time() -> None:
    changed = simulate(replace(TINY, changes=(PolicyChange(2 * DAY, ("a",), PolicyConfig()),)))
    never = simulate(TINY)
    preemptions = changed.outcome.preemptions()
    assert preemptions, "the change should let high jobs preempt in pool a"
    assert {p.pool for p in preemptions} == {"a"}
    assert min(p.time_s for p in preemptions) >= 2 * DAY
    assert not never.outcome.preemptions()

    def runs(sim, pool: str) -> list[tuple]:  # type: ignore[no-untyped-def]
        o = sim.outcome
        return [(sim.jobs[r.job].job_id, r.run, r.start_s, r.end_s) for r in o.runs if sim.jobs[r.job].pool == pool]

    assert runs(changed, "b") == runs(never, "b")


def test_a_scheduled_min_run_change_stops_preemptions_that_the_old_rule_allowed() -> None:
    on = replace(TINY, policy=PolicyConfig(min_run_s=0.0))
    before = simulate(on).outcome.preemptions()
    protected = simulate(replace(on, changes=(PolicyChange(2 * DAY, ("a", "b"), PolicyConfig(min_run_s=1e9)),)))
    after = protected.outcome.preemptions()
    assert any(p.time_s >= 2 * DAY for p in before)
    assert after and all(p.time_s <= 2 * DAY + PolicyConfig().grace_s for p in after)


def test_a_change_naming_an_unknown_pool_is_refused() -> None:
    with pytest.raises(ConfigError, match="not in the cluster"):
        replace(TINY, changes=(PolicyChange(DAY, ("nope",), PolicyConfig()),))


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "preemptlens.toml"
    path.write_text(body)
    return path


PILOT_TOML = """
[cluster]
name = "pilot"

[pilot.pilots.trial]
pools = ["p1", "p2", "p3", "p4"]
control = ["c1", "c2", "c3", "c4"]
start = "2026-01-19T00:00:00Z"
what = "preemption on"
"""


def test_declared_pilots_are_read_and_checked(tmp_path: Path) -> None:
    (pilot,) = declared(load_config(str(_config(tmp_path, PILOT_TOML)))).values()
    assert pilot == Pilot("trial", "pilot", ("p1", "p2", "p3", "p4"), ("c1", "c2", "c3", "c4"),
                          datetime(2026, 1, 19, tzinfo=UTC), "preemption on")
    bad = PILOT_TOML.replace('control = ["c1", "c2", "c3", "c4"]', 'control = ["p1"]\ncolour = "red"')
    with pytest.raises(ConfigError, match="unknown key"):
        declared(load_config(str(_config(tmp_path, bad))))
    overlap = PILOT_TOML.replace('control = ["c1", "c2", "c3", "c4"]', 'control = ["p1"]')
    with pytest.raises(ConfigError, match="both in the pilot and the control: p1"):
        declared(load_config(str(_config(tmp_path, overlap))))
    with pytest.raises(ConfigError, match="not an ISO 8601 time"):
        declared(load_config(str(_config(tmp_path, PILOT_TOML.replace("2026-01-19T00:00:00Z", "monday")))))


def test_pilot_settings_across_fields_are_checked_when_read(tmp_path: Path) -> None:
    # Each setting's range when the file is read, all problems at once; the section's own check for the rest.
    with pytest.raises(ConfigError, match=r"pilot.confidence: 1.5 is out of range(.|\n)*pilot.bootstrap_samples: 10"):
        load_config(str(_config(tmp_path, "[pilot]\nconfidence = 1.5\nbootstrap_samples = 10\n")))
    with pytest.raises(ConfigError, match=r"confidence must be in \[0.5, 1\); bootstrap_samples must be >= 100"):
        PilotSettings(confidence=1.5, bootstrap_samples=10)
    assert PilotSettings(before_days=7.0).before_days == 7.0


def test_bootstrap_replicates_are_the_weighted_figures_of_the_drawn_days_and_pools() -> None:
    rng = np.random.default_rng(1)
    values = rng.exponential(100.0, size=500)
    days = rng.integers(0, 5, size=500)
    pools = rng.integers(0, 3, size=500)
    cell = _Cell(values, days, pools)
    day_w = rng.multinomial(5, np.full(5, 0.2), size=40).astype(float)
    pool_w = rng.multinomial(3, np.full(3, 1 / 3), size=40).astype(float)
    draws = _Draws(day_w, pool_w)
    exact, reps = _ratio_reps(cell, draws)
    assert exact == pytest.approx(values.mean())
    for b in range(40):
        w = day_w[b, days] * pool_w[b, pools]
        assert reps[b] == pytest.approx((w * values).sum() / w.sum())
    # A quantile's replicate is the weighted quantile of the drawn observations, to within its rank bin.
    exact, reps = _quantile_reps(cell, draws, 0.9)
    assert exact == pytest.approx(np.quantile(values, 0.9))
    order = np.argsort(values)
    edges = np.quantile(values, np.linspace(0.0, 1.0, 257))
    for b in range(40):
        w = (day_w[b, days] * pool_w[b, pools])[order]
        truth = values[order][np.searchsorted(np.cumsum(w) / w.sum(), 0.9)]
        assert abs(np.searchsorted(edges, reps[b]) - np.searchsorted(edges, truth)) <= 1


def test_pilot_command_prints_the_evaluation_and_the_candidates(harmful_warehouse: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cfg = str(_config(tmp_path, PILOT_TOML))
    assert main(["--config", cfg, "--warehouse", str(harmful_warehouse), "pilot", "trial"]) == 0
    out = capsys.readouterr().out
    assert "verdict: ROLL BACK" in out
    assert "critical+high queue wait, p90" in out and "unknown: no pool-days" in out  # no GPU samples loaded
    assert "WARNING" not in out  # four control pools
    assert main(["--config", cfg, "--warehouse", str(harmful_warehouse), "pilot", "adhoc", "--pools", "p1",
                 "--control", "c1,c2", "--start", "2026-01-19", "--what", "preemption on in p1"]) == 0
    adhoc = capsys.readouterr().out
    assert "pilot adhoc on cluster pilot: preemption on in p1" in adhoc
    assert "WARNING: only 2 control pool(s), fewer than pilot.min_control_pools (3)" in adhoc
    # figures read as numbers with units: no e-notation, durations as durations
    assert not re.search(r"\d[eE][+-]\d", adhoc)
    assert main(["--config", cfg, "--warehouse", str(harmful_warehouse), "pilot"]) == 0
    listing = capsys.readouterr().out
    assert "declared pilots: trial" in listing and "pilot/p1 tier low: recoverable no" in listing
    # the scorecard's own wording of the verdict, as the CLI, dashboard and report give it
    with Warehouse(harmful_warehouse) as wh:
        line = verdict_line(wh, "pilot")
    assert f"readiness of pilot: {line}" in listing
    assert main(["--config", cfg, "--warehouse", str(harmful_warehouse), "pilot", "other", "--pools", "p1"]) == 2
    assert "missing control, start, what" in capsys.readouterr().err
    assert main(["--config", cfg, "--warehouse", str(harmful_warehouse), "pilot", "trial", "--control", "c1,zz"]) == 2
    err = capsys.readouterr().err
    assert "no jobs in pool(s) zz of cluster 'pilot'" in err and "Traceback" not in err


def test_a_pilot_naming_no_cluster_is_of_the_only_one(harmful_warehouse: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """This warehouse holds the pilot's cluster and its counterfactual: which one must be said (a warehouse of
    one cluster: tests/dashboards/test_report.py)."""
    cfg = str(_config(tmp_path, PILOT_TOML.replace('[cluster]\nname = "pilot"\n', "")))
    assert main(["--config", cfg, "--warehouse", str(harmful_warehouse), "pilot", "trial"]) == 2
    err = capsys.readouterr().err
    assert "pilot trial: no cluster given, and the warehouse holds clusters pilot, pilot-cf" in err
    assert "give --cluster" in err and "Traceback" not in err
    assert main(["--config", cfg, "--warehouse", str(harmful_warehouse), "pilot", "trial", "--cluster", "pilot"]) == 0
    assert "pilot trial on cluster pilot: preemption on" in capsys.readouterr().out
    (pilot,) = declared(load_config(cfg)).values()
    assert pilot.cluster == "" and on_cluster(pilot, ["pilot"]).cluster == "pilot"
    with pytest.raises(ConfigError, match="the warehouse holds no jobs"):
        on_cluster(pilot, [])


def test_the_report_without_a_week_reports_the_last_week_with_data(harmful_warehouse: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The simulation ended in early 2026, long before the last complete week: that week has no data."""
    with Warehouse(harmful_warehouse, read_only=True) as wh:
        last = wh.query("SELECT max(greatest(coalesce(end_time, start_time), start_time)) AS t FROM job_runs")["t"][0]
    week = report.Week.of(last - timedelta(microseconds=1))
    assert week.end <= report.Week.last_complete(datetime.now(UTC)).start
    out = tmp_path / "reports"
    assert main(["--warehouse", str(harmful_warehouse), "report", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"the data end at {last:%Y-%m-%d %H:%M} UTC, before the last complete week: reporting {week.label}" \
        in printed
    assert (out / f"preemptlens-{week.label}.md").exists()
    # `--week last` (serve's) is the calendar's week, with data or not
    assert main(["--warehouse", str(harmful_warehouse), "report", "--week", "last", "--out", str(out)]) == 0
    calendar = report.Week.last_complete(datetime.now(UTC)).label
    assert capsys.readouterr().out.startswith(f"weekly report {calendar}:")


def test_pilot_loss_alert_fires_once_per_week_for_a_running_pilot(harmful_warehouse: Path, tmp_path: Path) -> None:
    config = load_config(str(_config(tmp_path, PILOT_TOML)))
    now = datetime(2026, 2, 2, 12, tzinfo=UTC)
    targets = {alerts.PLATFORM: alerts.Target(alerts.PLATFORM, Secret("http://127.0.0.1:9/unused"))}
    rule = alerts.RULES["pilot_loss"]
    with Warehouse(harmful_warehouse) as wh:
        (alert,) = rule.evaluate(wh, config, now)
        assert alert.title == "Pilot trial shows a clear loss: roll back"
        assert "costs clearly exceed gains" in alert.text
        assert alerts.evaluate(wh, config, targets, now, rules=[rule]) == 1
        assert alerts.evaluate(wh, config, targets, now + timedelta(days=1), rules=[rule]) == 0  # same ISO week
        # Ended pilots raise nothing.
        ended = load_config(str(_config(tmp_path, PILOT_TOML + 'end = "2026-01-26T00:00:00Z"\n')))
        assert rule.evaluate(wh, ended, now) == []


def test_weekly_report_has_a_pilot_section_while_it_runs(harmful_warehouse: Path) -> None:
    pilot = HARMFUL.pilot()
    week = report.Week(2026, 5)  # the pilot's third week
    with reader(harmful_warehouse, scope=EVERYTHING) as r:
        weekly = report.build(r, week, top_n=5, trend_weeks=4, pilots=(pilot,), thresholds=PilotSettings())
        before = report.build(r, report.Week(2026, 2), top_n=5, trend_weeks=4, pilots=(pilot,))
    markdown = report.render_markdown(weekly)
    assert "**Pilot trial** (preemption on;" in markdown and "**roll back**" in markdown
    assert "critical+high queue wait, p90" in markdown
    html = report.render_html(weekly)
    assert "<h2>Pilot trial: roll back</h2>" in html and 'id="pilot-1-figures"' in html
    assert before.pilots == ()  # the week before the change has no pilot section
    assert "Pilot trial" not in report.render_markdown(before)
    (_, ev) = weekly.pilots[0]
    # Evaluated on the data up to the week's end (here the simulation's end, two weeks after the change).
    assert not isinstance(ev, str) and ev.after_end <= week.end and ev.days_after == 14


def _figure(key: str, role: str, unit: str, did: float, low: float, high: float, before: float = 1.0) -> Figure:
    return Figure(key=key, label=key, unit=unit, role=role, pilot_before=before, pilot_after=before + did,
                  control_before=0.0, control_after=0.0, n=(100, 100, 100, 100), n_of="runs", did=did, low=low,
                  high=high, sd_after=1.0, sd_before=1.0)


def test_costs_clearly_worse_and_no_clear_gain_roll_back_with_the_costs_listed() -> None:
    # bench_pilot's case: retries and work thrown away clearly worse, the wait's interval holds both a gain and
    # none (it neither shows a gain nor rules one out): roll back, naming what got worse
    figures = [
        _figure("high_wait_p50_s", "gain", "s", -20.0, -400.0, 300.0),
        _figure("high_wait_p90_s", "gain", "s", -30.0, -500.0, 200.0),
        _figure("completion_p50_s_all", "context", "s", 10.0, -50.0, 80.0, before=3600.0),
        _figure("retries_per_job", "cost", "retries", 0.4, 0.3, 0.5),
        _figure("thrown_away_share", "cost", "share", 0.05, 0.03, 0.07),
        _figure("net_benefit_share", "balance", "share", -0.01, -0.05, 0.02),
    ]
    verdict, reasons, _ = decide(figures, PilotSettings(), days_after=14)
    assert verdict == "roll back"
    assert any(r.startswith("clearly worse: retries_per_job +0.400 retries") for r in reasons), reasons
    assert any(r.startswith("clearly worse: thrown_away_share +5.0 points") for r in reasons), reasons
    assert reasons[-1].startswith("and no clear gain of 60 s or more for time-sensitive work")
    # the same costs with a clear gain are weighed, not rolled back
    gained = [_figure("high_wait_p50_s", "gain", "s", -600.0, -900.0, -300.0), *figures[1:]]
    assert decide(gained, PilotSettings(), days_after=14)[0] == "keep piloting"
