"""analytics_params is derived from the [analytics] settings: a new setting needs no migration."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from analytics_scenario import Scenario

from preemptlens.analytics import params as params_module
from preemptlens.analytics.params import AnalyticsSettings, param_columns
from preemptlens.analytics.refresh import write_params
from preemptlens.analytics.views import apply_views
from preemptlens.config import section, setting


def test_analyze_writes_every_number_setting_under_its_name(sc: Scenario) -> None:
    migrated = [tuple(r[:2]) for r in sc.wh.con.execute("DESCRIBE analytics_params").fetchall()]
    # A warehouse as migration 0003 left it has the same columns, in the same order, as the settings give.
    assert migrated == param_columns()
    sc.analyze(idle_rule="zero", hoarding_window_s=900.0, trend_weeks=5)
    row = sc.wh.query("SELECT * FROM analytics_params").to_dicts()
    assert len(row) == 1
    assert row[0]["idle_zero_rule"] is True
    assert row[0]["hoarding_window_s"] == 900.0 and row[0]["trend_weeks"] == 5
    assert row[0]["sample_step_s"] == 60.0  # inferred: no samples


@section("analytics", "[analytics] with a setting added after the warehouse was created.")
@dataclass(frozen=True)
class _Extended(AnalyticsSettings):
    new_share_max: float = setting(0.3, "A setting added after the warehouse was created.")


def test_a_new_setting_is_a_column_without_a_migration(sc: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(params_module, "SETTINGS", _Extended)
    write_params(sc.wh, _Extended(), {})
    assert sc.wh.query("SELECT new_share_max FROM analytics_params")["new_share_max"].to_list() == [0.3]
    # The views still run on the redefined table.
    assert "preemption_ledger" in apply_views(sc.wh)
