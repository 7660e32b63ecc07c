"""`analyze` recomputes a view only when what it is computed from changed: nothing after nothing changed,
the views reading the live costs after a live-cost computation, everything after a load or a setting; and
what it keeps equals what a full recompute gives."""

from __future__ import annotations

import polars as pl
from analytics_scenario import Scenario, at
from polars.testing import assert_frame_equal
from test_live_cost import AT, SETTINGS, build

from preemptlens.analytics.livecost import compute
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.views import registry
from preemptlens.warehouse import Warehouse, quote

ALL = sorted(v.name for v in registry())


def _figures(wh: Warehouse) -> dict[str, pl.DataFrame]:
    frames = {}
    for name in ALL:
        frame = wh.query(f"SELECT * FROM {quote(name)}")
        frames[name] = frame.sort(frame.columns, nulls_last=True)
    return frames


def _same_as_full(wh: Warehouse, params: AnalyticsSettings) -> None:
    kept = _figures(wh)
    assert sorted(analyze(wh, params, full=True).views) == ALL
    for name, frame in _figures(wh).items():
        assert_frame_equal(kept[name], frame, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def test_nothing_changed_recomputes_nothing_and_each_change_recomputes_what_reads_it(
    wh: Warehouse, sc: Scenario
) -> None:
    build(sc)
    first = sc.analyze()
    assert sorted(first.views) == ALL and first.kept == [] and first.unchanged_since is None
    finished = wh.query("SELECT updated_at FROM analytics_state WHERE name = 'analyze.inputs'").item()

    again = sc.analyze()
    assert (again.views, again.unchanged_since, sorted(again.kept)) == ([], finished, ALL)
    assert wh.query("SELECT updated_at FROM analytics_state WHERE name = 'analyze.inputs'").item() == finished

    # A live cost computed: only the view that reads the live costs' history.
    compute(wh, at(AT), SETTINGS)
    costs = sc.analyze()
    assert costs.views == ["preemption_live_costs"] and len(costs.kept) == len(ALL) - 1
    # The same instant computed again stores the same rows: nothing to do.
    compute(wh, at(AT), SETTINGS)
    assert sc.analyze().views == []

    # A load (a new preemption of H2): every view that reads what loads write.
    before = wh.query("SELECT count(*) FROM preemption_ledger").item()
    sc.run("H2", 2, 4, "a", 2500, 4000, "preempted", preemptor_job_id="P1")
    sc.run("H2", 3, 4, "a", 4300, 5000, "completed")
    loaded = sc.analyze()
    assert "preemption_ledger" in loaded.views and "stg_runs" in loaded.views
    assert wh.query("SELECT count(*) FROM preemption_ledger").item() == before + 1

    # A setting: the views that read it.
    window = sc.analyze(requeue_window_s=1000.0)
    assert "expected_requeue" in window.views
    assert wh.query("SELECT count(*) FROM expected_requeue").item() == 0
    assert sc.analyze(requeue_window_s=1000.0).views == []

    # Rows deleted outside the load API (no load recorded) still change a count.
    wh.con.execute("DELETE FROM preemption_links")
    wh.con.execute("DELETE FROM job_runs WHERE job_id = 'H2' AND run = 3")
    assert "preemption_ledger" in sc.analyze(requeue_window_s=1000.0).views

    # A figure's table dropped is built again.
    wh.con.execute("DROP TABLE scope_creep_trend")
    assert "scope_creep_trend" in sc.analyze(requeue_window_s=1000.0).views

    _same_as_full(wh, AnalyticsSettings(requeue_window_s=1000.0))
