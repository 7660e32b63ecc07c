"""The Operations page shows what the data lacks (data_issues), per collector and issue, counted."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import fixture_cluster as fc
import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.contract import Batch, Reject
from preemptlens.warehouse import Warehouse

APP = str(Path(__file__).resolve().parents[2] / "dashboards" / "app.py")
T = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


@pytest.fixture
def lacking(cluster_warehouse: Path, tmp_path: Path) -> Path:
    """The hand-made cluster plus what a Kubernetes collection may bring: a Workload first seen after its
    eviction (no start, no pool, its preemptor unknown), and an event whose victim was never collected."""
    path = tmp_path / "w.duckdb"
    shutil.copy(cluster_warehouse, path)
    with Warehouse(path) as wh:
        wh.load("jobs", pl.DataFrame([{"cluster": fc.CLUSTER, "job_id": "wl-late", "tier": "low", "preemptible": True,
                                       "gpus": 8, "submit_time": T, "team": "vision"}]), "kubernetes")
        wh.load("job_runs", pl.DataFrame([{"cluster": fc.CLUSTER, "job_id": "wl-late", "run": 1, "gpus": 8,
                                           "state": "preempted", "end_time": T}]), "kubernetes")
        wh.load("preemption_links", pl.DataFrame([
            {"cluster": fc.CLUSTER, "victim_job_id": "pod-gone", "time": T, "reporter": "default-scheduler"},
            # an Event on a pod its own team deleted, which the collector could no longer read back
            {"cluster": fc.CLUSTER, "victim_job_id": "pod-deleted", "time": T, "reporter": "default-scheduler",
             "victim_kind": "pod"}]), "kubernetes")
        wh.load("jobs", pl.DataFrame([{"cluster": fc.CLUSTER, "job_id": "pod-deleted", "tier": "low",
                                       "preemptible": True, "gpus": 4, "submit_time": T, "team": "vision"}]),
                "kubernetes")
        wh.load("job_runs", pl.DataFrame([{"cluster": fc.CLUSTER, "job_id": "pod-deleted", "run": 1, "gpus": 4,
                                           "state": "cancelled", "reason": "deleted", "start_time": T,
                                           "end_time": T}]), "kubernetes")
        # and two Events their victims' state gainsaid, quarantined by the collector
        wh.load_batch(Batch(source="kubernetes", frames={}, rejects=[
            Reject("preemption_links", f"events team-b/train-b-{i}.1", "corroboration",
                   f"claimed but not corroborated by the victim pod team-b/train-b-{i}: the pod carries no "
                   "DisruptionTarget condition", None) for i in range(2)]))
        analyze(wh, AnalyticsSettings())
    return path


def test_operations_counts_what_the_data_lacks_per_collector(lacking: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(lacking))
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("app_pages/operations.py").run()
    assert not at.exception, at.exception
    assert "What the data lacks" in [h.value for h in at.header]
    shown = at.dataframe[-1].value
    rows = {(r["collector"], r["issue"]): (r["records"], r["jobs"]) for r in shown.to_dict("records")}
    assert rows[("kubernetes", "preemption with unknown run start")] == (1, 1)
    assert rows[("kubernetes", "preemption with unknown pool")] == (1, 1)
    assert rows[("kubernetes", "preemption with unknown preemptor")] == (1, 1)
    assert rows[("kubernetes", "preemption link whose victim has no runs")] == (1, 1)
    assert rows[("kubernetes", "preemption claimed by an event, not corroborated by its victim")] == (1, 1)
    # the quarantined claims are counted, all of them, by what failed
    (counts,) = [d.value for d in at.dataframe if "example" in d.value.columns]
    counted = {(r["source"], r["target_table"], r["field"]): r for r in counts.to_dict("records")}
    claims = counted[("kubernetes", "preemption_links", "corroboration")]
    assert claims["records"] == 2 and claims["example"].startswith("claimed but not corroborated")
    # the fixture's own runs carry source `fixture`: counted apart
    assert {c for c, _ in rows} <= {"kubernetes", "fixture"}
