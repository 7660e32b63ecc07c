"""The victim's view (My preemptions) says when an action boosted or protected the job, and why."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import fixture_cluster

from preemptlens.analytics.actions import hold_text
from preemptlens.dashboards import data
from preemptlens.reading.masking import EVERYTHING
from preemptlens.warehouse import Warehouse


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
