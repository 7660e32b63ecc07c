"""A hand-made world for the actions engine: jobs, runs, pools, checkpoints and the live costs it reads.

The engine's rules are about each job's own figures and their age, so the world replaces the view
`live_costs_latest` (the latest computation's rows, all of one instant: tests/analytics/test_live_cost.py)
by a table of one row per job at an instant the test sets; each row also goes into the history `live_costs`,
where a victim waiting to restart finds the cost it had when it was preempted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from preemptlens.analytics.actions import ActionSettings, settings_from
from preemptlens.config import load_config
from preemptlens.warehouse import Warehouse

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
H = 3600.0


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


class World:
    def __init__(self, wh: Warehouse, cluster: str = "c1") -> None:
        self.wh = wh
        self.cluster = cluster
        kind = wh.con.execute(
            "SELECT table_type FROM information_schema.tables WHERE table_name = 'live_costs_latest'").fetchone()
        if kind is not None and kind[0] == "VIEW":
            wh.con.execute("DROP VIEW live_costs_latest")
            wh.con.execute("CREATE TABLE live_costs_latest AS SELECT * FROM live_costs LIMIT 0")

    def job(self, job_id: str, *, pool: str = "p1", gpus: int = 8, source: str = "kubernetes") -> None:
        self.wh.con.execute(
            "INSERT INTO jobs (cluster, job_id, tier, preemptible, pool, gpus, submit_time, source, _load_id) "
            "VALUES ($c, $j, 'low', true, $p, $g, $t, $s, 'test')",
            {"c": self.cluster, "j": job_id, "p": pool, "g": gpus, "t": T0 - timedelta(days=1), "s": source})

    def pool(self, pool: str, gpus: int) -> None:
        self.wh.con.execute("INSERT INTO pools (cluster, pool, valid_from, gpus, source, _load_id) "
                            "VALUES ($c, $p, $t, $g, 'test', 'test')",
                            {"c": self.cluster, "p": pool, "t": T0 - timedelta(days=2), "g": gpus})

    def cost(self, job_id: str, at: datetime, cost_gpu_s: float | None, near: float | None = None, *,
             pool: str = "p1", gpus: int = 8) -> None:
        """The job's latest live cost (replacing the one before)."""
        self.wh.con.execute("DELETE FROM live_costs_latest WHERE cluster = $c AND job_id = $j",
                            {"c": self.cluster, "j": job_id})
        for into in ("INTO live_costs_latest", "OR REPLACE INTO live_costs"):
            self.wh.con.execute(
                f"INSERT {into} (cluster, job_id, run, pool, tier, team, user_name, gpus, computed_at, "
                "cost_gpu_s, near_completion_share) VALUES ($c, $j, 1, $p, 'low', 'team-a', 'ann', $g, $t, $cost, "
                "$near)",
                {"c": self.cluster, "j": job_id, "p": pool, "g": gpus, "t": at, "cost": cost_gpu_s, "near": near})

    def run(self, job_id: str, run: int, state: str, start: datetime | None, end: datetime | None = None) -> None:
        """A run of the job as the scheduler reported it (replacing the same run)."""
        self.wh.con.execute(
            "INSERT OR REPLACE INTO job_runs (cluster, job_id, run, gpus, start_time, end_time, state, source, "
            "_load_id) VALUES ($c, $j, $r, 8, $s, $e, $state, 'test', 'test')",
            {"c": self.cluster, "j": job_id, "r": run, "s": start, "e": end, "state": state})

    def gone(self, job_id: str) -> None:
        self.wh.con.execute("DELETE FROM live_costs_latest WHERE job_id = $j", {"j": job_id})

    def checkpoint(self, job_id: str, at: datetime) -> None:
        self.wh.con.execute("INSERT INTO checkpoints (cluster, job_id, kind, time, source, _load_id) "
                            "VALUES ($c, $j, 'checkpoint', $t, 'test', 'test')",
                            {"c": self.cluster, "j": job_id, "t": at})

    def rows(self, action: str | None = None) -> list[dict[str, Any]]:
        return list(self.wh.query(
            "SELECT * FROM actions WHERE $a IS NULL OR action = $a ORDER BY id", {"a": action}).iter_rows(named=True))

    def open(self, action: str) -> dict[str, int]:
        """job_id -> level of the open rows."""
        return {r["job_id"]: r["level"] for r in self.rows(action) if r["undone_at"] is None}


def section(name: str, **values: bool | int | float | str) -> str:
    """One settings section as TOML text, keys in the order given. The action tests each write a few sections
    that differ in one or two keys; spelling those as keywords keeps the difference visible and the rest
    written once."""
    def toml(value: bool | int | float | str) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return f'"{value}"' if isinstance(value, str) else str(value)
    return f"\n[{name}]\n" + "".join(f"{key} = {toml(value)}\n" for key, value in values.items())


def kueue_boost(mode: str, **values: bool | int | float | str) -> str:
    """The [kueue_boost] section both action test files start from: enabled, marks at 8 and 4 GPU-h (a job at
    9 GPU-h is held, one at 2 GPU-h is not); `values` add keys or replace these."""
    return section("kueue_boost", **{"enabled": True, "mode": mode, "cost_high_gpu_s": 28800,
                                     "cost_low_gpu_s": 14400, **values})


def settings(tmp_path: Any, toml: str) -> dict[str, ActionSettings]:
    path = tmp_path / "preemptlens.toml"
    path.write_text(toml)
    return settings_from(load_config(str(path)))
