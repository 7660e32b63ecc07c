"""The live preemption cost of every running job (docs/figures.md section 7), stored in `live_costs`.

What stopping a job now would cost: its GPUs x (the progress at risk since its
last checkpoint, by the ledger's own rule; the warm-up its restart is expected
to take; the requeue wait of victims of its tier, pool and size: expected_requeue),
each component kept apart, with its near-completion share and how often it and
its team were preempted recently. `preemptlens cost` computes it once, `serve` on an interval; the
/live-costs endpoint, /metrics and the Preemptions page read the stored rows.
The figure is one named query (sql/live/live_costs.sql) over the raw tables of
what runs now and the ledger figures of the last analyze.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb
import polars as pl

from preemptlens.config import section, setting
from preemptlens.errors import SchemaError
from preemptlens.reading.words import duration
from preemptlens.warehouse import Warehouse, query_sql


@section(
    "live_cost",
    "The live preemption cost of running jobs (`preemptlens cost`, serve's `cost` job, /live-costs).",
)
@dataclass(frozen=True)
class LiveCostSettings:
    interval_s: float = setting(
        300.0, "Seconds between live-cost computations in `preemptlens serve`.",
        bounds=(1, 86_400),
    )
    recent_window_s: float = setting(
        7 * 86400.0,
        "Window (seconds before the computation) in which a job's and its team's preemptions count as recent.",
        bounds=(3600, 366 * 86_400),
    )
    max_data_age_s: float = setting(
        3600.0,
        "Seconds after the end of a scheduler source's data (its newest record, or the last moment a live read "
        "reported up to; not when it was loaded) beyond which its running jobs' progress at risk, near-completion "
        "share and cost are unknown: a stalled collection must not grow costs. `preemptlens cost` without --at "
        "computes at the data's end when every source's data ended longer ago than this.",
        bounds=(60, 366 * 86_400),
    )
    keep_days: float = setting(
        14.0,
        "Days of live-cost history kept; each computation deletes older rows, so live_costs stays bounded.",
        bounds=(1, 3660),
    )
    top_jobs: int = setting(
        20,
        "Jobs with the largest live cost that /metrics exposes one by one (the gauge's series are bounded "
        "by this); `preemptlens cost` prints as many by default.",
        bounds=(1, 1000),
    )
    endpoint_limit: int = setting(
        1000,
        "Most jobs /live-costs returns in one answer, whatever `limit` the request asks for.",
        bounds=(1, 100_000),
    )


SETTINGS = LiveCostSettings

# The figure tables the live cost reads: without them (no analyze yet) its history inputs do not exist.
_NEEDS = ("preemption_ledger", "expected_requeue")

_COLUMNS = (
    "cluster, job_id, run, pool, tier, team, user_name, preemptible, gpus, computed_at, run_start, "
    "last_checkpoint_time, at_risk_s, at_risk_gpu_s, expected_warmup_s, warmup_basis, warmup_gpu_s, "
    "expected_requeue_s, requeue_basis, requeue_at_least, requeue_gpu_s, cost_gpu_s, near_completion_share, "
    "job_preemptions_recent, team_preemptions_recent, basis, progress_source, unknown"
)

# One computation's jobs (the latest, or the one at $at), costliest first; an unknown cost after every known one.
TOP_SQL = """
SELECT * FROM (
    SELECT * FROM live_costs_latest WHERE $at IS NULL
    UNION ALL
    SELECT * FROM live_costs WHERE computed_at = CAST($at AS TIMESTAMPTZ)
)
WHERE coalesce(cluster = CAST($cluster AS VARCHAR), true) AND coalesce(pool = CAST($pool AS VARCHAR), true)
ORDER BY cost_gpu_s DESC NULLS LAST, cluster, job_id
LIMIT $limit
"""


@dataclass(frozen=True)
class Computation:
    computed_at: datetime
    jobs: int
    unknown: int
    deleted: int


def missing_figures(wh: Warehouse) -> list[str]:
    """The figure tables the live cost reads that no `analyze` has stored yet."""
    present = {
        str(r[0])
        for r in wh.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'BASE TABLE'"
        ).fetchall()
    }
    return [t for t in _NEEDS if t not in present]


def _define_data_ends(con: duckdb.DuckDBPyConnection) -> None:
    """`source_data_ends` in this connection: how far each source's data reach (sql/live/data_ends.sql)."""
    ends = query_sql("live", "data_ends")
    con.execute(f"CREATE OR REPLACE TEMP VIEW source_data_ends AS {ends}")


@dataclass(frozen=True)
class Instant:
    """When to compute the live cost, and, when that is not the moment asked for, why."""

    at: datetime
    note: str | None = None


def default_instant(wh: Warehouse, now: datetime, settings: LiveCostSettings) -> Instant:
    """`now`, unless the data of every source of jobs ended more than max_data_age_s before it (a simulation, an
    import, a recorded sacct file, stalled collectors): then the newest data end, where the jobs last ran."""
    _define_data_ends(wh.con)
    newest = wh.con.execute("SELECT max(data_end) FROM source_data_ends").fetchall()[0][0]
    if newest is None or (now - newest).total_seconds() <= settings.max_data_age_s:
        return Instant(now)
    ago = duration((now - newest).total_seconds())
    return Instant(newest, f"the data end at {newest:%Y-%m-%d %H:%M:%S} UTC, {ago} before now "
                           "(no source of jobs has a newer record or live read): computed at the data's end; "
                           "--at now computes at the wall clock, where no job's cost is known")


def compute(wh: Warehouse, at: datetime, settings: LiveCostSettings) -> Computation:
    """Compute and store the live cost of every job running at `at`; computing again at `at` stores the same."""
    missing = missing_figures(wh)
    if missing:
        raise SchemaError(
            f"live cost: the warehouse has no {', '.join(missing)} yet",
            "run `preemptlens analyze` first: the warm-up and requeue history come from its figures",
        )
    params = {"at": at, "recent_s": settings.recent_window_s, "max_age_s": settings.max_data_age_s}
    _define_data_ends(wh.con)
    figure = query_sql("live", "live_costs")
    with wh.transaction():
        # The instant's rows are replaced whole: a job that no longer runs at `at` in the data loses its row.
        wh.con.execute("DELETE FROM live_costs WHERE computed_at = $at", {"at": at})
        wh.con.execute(
            f"INSERT INTO live_costs ({_COLUMNS}) SELECT {_COLUMNS} FROM ({figure})",  # noqa: S608 -- constants only
            params,
        )
        jobs, unknown = wh.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE cost_gpu_s IS NULL) FROM live_costs WHERE computed_at = $at",
            {"at": at},
        ).fetchall()[0]
        wh.con.execute("INSERT OR REPLACE INTO live_cost_computations VALUES ($at, $jobs)", {"at": at, "jobs": jobs})
        horizon = at - timedelta(days=settings.keep_days)
        deleted = wh.con.execute(
            "DELETE FROM live_costs WHERE computed_at < $h", {"h": horizon}
        ).fetchall()[0][0]
        wh.con.execute("DELETE FROM live_cost_computations WHERE computed_at < $h", {"h": horizon})
    wh.mark_changed()
    return Computation(at, int(jobs), int(unknown), int(deleted))


def top(
    con: duckdb.DuckDBPyConnection, limit: int, *, cluster: str | None = None, pool: str | None = None,
    at: datetime | None = None,
) -> pl.DataFrame:
    """The `limit` costliest jobs of the computation at `at`, else of the latest (from the warehouse or its
    snapshot)."""
    frame = pl.from_arrow(
        con.sql(TOP_SQL, params={"limit": limit, "cluster": cluster, "pool": pool, "at": at}).to_arrow_table()
    )
    assert isinstance(frame, pl.DataFrame)
    return frame


def records(frame: pl.DataFrame) -> list[dict[str, object]]:
    """Rows as JSON-ready dicts: times in ISO 8601 UTC, unknown as null."""
    out = []
    for row in frame.iter_rows(named=True):
        out.append({k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()})
    return out
