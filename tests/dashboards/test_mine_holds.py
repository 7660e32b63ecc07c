"""The victim's view (My preemptions) says when an action boosted or protected the job, and why, and when the
job should run again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import fixture_cluster
import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from preemptlens.analytics.actions import hold_text
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.dashboards import data
from preemptlens.reading.masking import EVERYTHING
from preemptlens.warehouse import Warehouse

APP = str(Path(__file__).resolve().parents[2] / "dashboards" / "app.py")


def test_my_preemptions_carry_the_hold_in_force_at_the_preemption(tmp_path: Path) -> None:
    path = fixture_cluster.build(tmp_path / "w.duckdb")
    with Warehouse(path) as wh:
        first = wh.query("SELECT cluster, victim_job_id, victim_team, time FROM preemption_ledger "
                         "ORDER BY time LIMIT 1").row(0, named=True)
        since = first["time"] - timedelta(hours=1)
        wh.con.execute(
            "INSERT INTO actions (action, scheduler, cluster, job_id, level, mode, why, cost_gpu_s, applied_at, "
            "held_since) VALUES ('kai_protect', 'kai', $c, $j, 1, 'dry-run', "
            "'near-completion share 0.93 >= kai_protect.near_completion_high (0.9)', NULL, $a, $a)",
            {"c": first["cluster"], "j": first["victim_job_id"], "a": since})
        wh.publish()
    window = data.Filters(start=first["time"] - timedelta(days=60), end=first["time"] + timedelta(days=60))
    with data.reader(path, scope=EVERYTHING) as r:
        rows = data.mine(r, window, (), (first["victim_team"],), 1000)
    held = [p for p in rows.iter_rows(named=True) if p["hold_action"] is not None]
    assert [(p["victim_job_id"], p["time"]) for p in held] == [(first["victim_job_id"], first["time"])]
    assert hold_text(held[0], held[0]["time"]) == (
        f"preemptlens would have protected it from {since:%Y-%m-%d %H:%M} UTC (kai_protect, dry-run: nothing was "
        "changed) because near-completion share 0.93 >= kai_protect.near_completion_high (0.9)")
    # Later preemptions of the same job (if any) are not matched to a hold applied after them.
    others = [p for p in rows.iter_rows(named=True) if p["hold_action"] is None]
    assert all(p["time"] < since or p["victim_job_id"] != first["victim_job_id"] for p in others)


def test_a_card_says_the_job_waited_longer_than_most_once_the_median_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three low-tier 8-GPU victims in pool a: two restart after 1 h and 2 h, W is still waiting 5 h at the data's
    end. Kaplan-Meier: S = 2/3 after 1 h, 1/3 after 2 h (median 2 h), never 0.1 (no p90 within the 5 h seen).
    Three victims are fewer than requeue_min_victims (10): the tier's estimate answers, and the card says so."""
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    hour = timedelta(hours=1)
    waits = {"R1": hour, "R2": 2 * hour, "W": None}
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.load("jobs", pl.DataFrame([
            {"cluster": "c1", "job_id": j, "tier": "low", "preemptible": True, "gpus": 8, "pool": "a",
             "submit_time": t0, "team": "vision", "user_name": "ana"} for j in waits]), "test")
        runs = [{"cluster": "c1", "job_id": j, "run": 1, "gpus": 8, "pool": "a", "start_time": t0,
                 "end_time": t0 + 10 * hour, "state": "preempted"} for j in waits]
        runs += [{"cluster": "c1", "job_id": j, "run": 2, "gpus": 8, "pool": "a", "start_time": t0 + 10 * hour + w,
                  "end_time": t0 + 15 * hour, "state": "completed"} for j, w in waits.items() if w is not None]
        wh.load("job_runs", pl.DataFrame(runs), "test")
        analyze(wh, AnalyticsSettings())
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(path))
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["cluster"] = "c1"
    at.query_params["job"] = "W"
    at.run()
    at.switch_page("app_pages/mine.py").run()
    assert not at.exception, at.exception
    expected = ("it has waited 5.0 h, longer than most: half of such victims restarted within 2.0 h, fewer than 9 "
                "in 10 within the longest wait seen, 5.0 h; from 3 recent victims of tier low of any size in any pool "
                "(too few with 8-31 GPUs in pool a), 2 restarted.")
    text = "\n".join(m.value for m in at.markdown)
    assert f"**Not restarted** by the end of the data; {expected}" in text
    # the Preemptions page's story of the same victim says the same
    at.switch_page("app_pages/preemptions.py").run()
    assert not at.exception, at.exception
    victim = at.selectbox(key="victim")
    victim.set_value(next(o for o in victim.options if o.startswith("W"))).run()
    text = "\n".join(m.value for m in at.markdown)
    assert ("**Not restarted** by the end of the data, 5.0 h after the preemption (the wait is still running); "
            f"{expected}") in text
