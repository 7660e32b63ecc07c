"""Idle stretches of allocated GPUs: the one heavy scan over gpu_samples.

A stretch is a run of consecutive idle samples of one GPU while it is
attributed to one job. Consecutive means at most 1.5 sampling steps apart, so
a missing sample ends the stretch (a gap is not idle time). Only stretches at
least the hoarding window long are kept; the views clip them to runs. The step
is each cluster's own (`infer_steps`): one warehouse can hold clusters whose
exporters are scraped every 15 s and every 60 s, and one step for both would
split the slower cluster's every stretch or join the faster one's gaps.

The refresh is incremental: it recomputes only from shortly before the
earliest sample that a load it has not seen yet wrote. A stretch that ends
there can only have grown from its own start, so per GPU the scan restarts at
the start of such a stretch, or one window (plus slack) before the new data.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from preemptlens.analytics.attribution import attributed
from preemptlens.analytics.attribution import rebuild as rebuild_attribution
from preemptlens.analytics.params import DEFAULT_STEP_S, AnalyticsSettings
from preemptlens.warehouse import Warehouse

log = logging.getLogger(__name__)

# Samples further apart than this many steps are not contiguous.
CONTIGUOUS_STEPS = 1.5
_STATE_KEY = "gpu_idle_stretches.params"


@dataclass(frozen=True)
class StretchRefresh:
    mode: str  # full | incremental | unchanged
    new_loads: int
    recomputed_from: datetime | None
    stretches: int


def infer_steps(wh: Warehouse, configured: float = 0.0) -> dict[str, float]:
    """Each cluster's collection step: `configured` (analytics.sample_step_s) when set, else the median
    spacing of one of its GPUs' samples."""
    clusters = [str(r[0]) for r in wh.con.execute("SELECT DISTINCT cluster FROM gpu_samples ORDER BY 1").fetchall()]
    if configured:
        return dict.fromkeys(clusters, configured)
    steps = {}
    for cluster in clusters:
        row = wh.con.execute(
            "WITH one AS (SELECT host, gpu_uuid, gpu_instance FROM gpu_samples WHERE cluster = $c LIMIT 1), "
            "times AS (SELECT s.time FROM gpu_samples s JOIN one USING (host, gpu_uuid, gpu_instance) "
            "WHERE s.cluster = $c), "
            "gaps AS (SELECT epoch(time) - epoch(lag(time) OVER (ORDER BY time)) AS gap FROM times) "
            "SELECT median(gap) FROM gaps WHERE gap > 0",
            {"c": cluster},
        ).fetchone()
        steps[cluster] = float(row[0]) if row and row[0] else DEFAULT_STEP_S
    return steps


def stored_steps(wh: Warehouse) -> dict[str, float]:
    """Each cluster's sampling step as the last `analyze` wrote it (analytics_sample_steps)."""
    return {str(c): float(s) for c, s in wh.con.execute(
        "SELECT cluster, sample_step_s FROM analytics_sample_steps ORDER BY cluster").fetchall()}


def _stretch_params(params: AnalyticsSettings, steps: dict[str, float]) -> str:
    return json.dumps(
        {
            "rule": params.idle_rule,
            "busy_below": params.idle_busy_below,
            "window": params.hoarding_window_s,
            "steps": steps,
        },
        sort_keys=True,
    )


def refresh_stretches(wh: Warehouse, params: AnalyticsSettings, *, full: bool = False) -> StretchRefresh:
    """Bring gpu_idle_stretches up to date with gpu_samples, in one transaction, each cluster at the sampling
    step analytics_sample_steps holds for it (refresh.write_params)."""
    con = wh.con
    steps = stored_steps(wh)
    wanted = _stretch_params(params, steps)
    state = con.execute("SELECT value FROM analytics_state WHERE name = $n", {"n": _STATE_KEY}).fetchone()
    if state is None or state[0] != wanted:
        full = True
    new_loads = [
        r[0]
        for r in con.execute(
            "SELECT load_id FROM _loads WHERE load_id NOT IN (SELECT load_id FROM analytics_loads_seen)"
        ).fetchall()
    ]
    if not full and not new_loads:
        return StretchRefresh("unchanged", 0, None, _count(wh))
    sql_params: dict[str, object] = {
        "contiguous": CONTIGUOUS_STEPS,
        "window": params.hoarding_window_s,
        "zero_rule": params.zero_rule,
        "busy_below": params.idle_busy_below,
    }
    recomputed_from: datetime | None = None
    with wh.transaction():
        con.execute("CREATE OR REPLACE TEMP TABLE _new_loads (load_id VARCHAR)")
        if new_loads:
            con.executemany("INSERT INTO _new_loads VALUES (?)", [(x,) for x in new_loads])
        attribution = rebuild_attribution(wh, None if full else "_new_loads")
        if full:
            con.execute("DELETE FROM gpu_idle_stretches")
            scan_join = ""
            time_filter = ""
            mode = "full"
        else:
            row = con.execute(
                "SELECT min(time) FROM gpu_samples WHERE _load_id IN (SELECT load_id FROM _new_loads)"
            ).fetchone()
            # New or changed runs can give unlabelled samples from their start on an owner.
            changed = [t for t in (row[0] if row else None, attribution.changed_from) if t is not None]
            changed_from = min(changed) if changed else None
            if changed_from is None:
                _mark_seen(wh, wanted)
                return StretchRefresh("unchanged", len(new_loads), None, _count(wh))
            # Earlier than the new data by one window plus slack: a short idle
            # run that was still open there is not stored and must be rebuilt.
            lead_in = params.hoarding_window_s + 3 * max(steps.values(), default=DEFAULT_STEP_S)
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _from AS SELECT $t::TIMESTAMPTZ - to_microseconds("
                "CAST($lead * 1e6 AS BIGINT)) AS cut",
                {"t": changed_from, "lead": lead_in},
            )
            # Per GPU: restart at the start of a stored stretch that reaches the
            # cut, so that no stretch is rebuilt from its middle.
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _gpu_from AS "
                "SELECT cluster, host, gpu_uuid, gpu_instance, least(min(start_time), min(cut)) AS from_time "
                "FROM gpu_idle_stretches, _from WHERE end_time >= cut "
                "GROUP BY cluster, host, gpu_uuid, gpu_instance"
            )
            con.execute(
                "DELETE FROM gpu_idle_stretches USING _from WHERE gpu_idle_stretches.end_time >= _from.cut"
            )
            cut_row = con.execute(
                "SELECT cut, least(cut, (SELECT min(from_time) FROM _gpu_from)) FROM _from"
            ).fetchone()
            assert cut_row is not None
            recomputed_from = cut_row[1]
            # Bound as constants, the earliest time lets the scan skip the
            # row groups of older samples by their time statistics.
            sql_params.update(cut=cut_row[0], scan_from=recomputed_from)
            scan_join = "LEFT JOIN _gpu_from f USING (cluster, host, gpu_uuid, gpu_instance)"
            time_filter = "AND s.time >= $scan_from AND s.time >= coalesce(f.from_time, $cut)"
            mode = "incremental"
        con.execute(
            f"""
            INSERT INTO gpu_idle_stretches
            WITH idle_labelled AS MATERIALIZED (
                SELECT s.cluster, s.host, s.gpu_uuid, s.gpu_instance, s.job_id, s.time
                FROM gpu_samples s {scan_join}
                WHERE is_idle(s.busy, $zero_rule, $busy_below) {time_filter}
            ),
            idle AS MATERIALIZED ({attributed("idle_labelled")}),
            -- Sorting on five strings per sample costs several times the scan:
            -- number each GPU's job once and sort the samples on that number.
            series AS (
                SELECT d.*, row_number() OVER () AS series, st.sample_step_s AS step
                FROM (SELECT DISTINCT cluster, host, gpu_uuid, gpu_instance, job_id FROM idle) d
                JOIN analytics_sample_steps st USING (cluster)
            ),
            keyed AS (
                SELECT r.series, r.step * $contiguous AS gap, i.time
                FROM idle i JOIN series r USING (cluster, host, gpu_uuid, gpu_instance, job_id)
            ),
            -- One sort gives each idle sample its neighbours' gaps and its
            -- position; only a stretch's first and last samples go on.
            edges AS (
                SELECT series, time,
                    coalesce(lag(series) OVER w = series
                        AND epoch(time) - epoch(lag(time) OVER w) <= gap, false) AS joins_previous,
                    coalesce(lead(series) OVER w = series
                        AND epoch(lead(time) OVER w) - epoch(time) <= gap, false) AS joins_next,
                    row_number() OVER w AS n
                FROM keyed
                WINDOW w AS (ORDER BY series, time)
            ),
            bounds AS (
                SELECT *, lead(time) OVER b AS next_time, lead(n) OVER b AS next_n
                FROM edges
                WHERE NOT joins_previous OR NOT joins_next
                WINDOW b AS (ORDER BY series, time)
            ),
            -- A first sample that is not also a last one is followed by its
            -- stretch's last sample among the bounds.
            stretches AS (
                SELECT r.cluster, r.host, r.gpu_uuid, r.gpu_instance, r.job_id,
                    b.time AS start_time,
                    CASE WHEN b.joins_next THEN b.next_time ELSE b.time END
                        + to_microseconds(CAST(r.step * 1e6 AS BIGINT)) AS end_time,
                    CASE WHEN b.joins_next THEN b.next_n - b.n + 1 ELSE 1 END AS samples
                FROM bounds b JOIN series r USING (series)
                WHERE NOT b.joins_previous
            )
            SELECT * FROM stretches WHERE epoch(end_time) - epoch(start_time) >= $window
            """,  # noqa: S608 -- only fixed fragments are interpolated; values are bound
            sql_params,
        )
        _mark_seen(wh, wanted)
    count = _count(wh)
    log.info("idle stretches: %s refresh, %d new loads, %d stretches", mode, len(new_loads), count)
    return StretchRefresh(mode, len(new_loads), recomputed_from, count)


def _mark_seen(wh: Warehouse, state: str) -> None:
    wh.con.execute(
        "INSERT INTO analytics_loads_seen SELECT load_id FROM _loads "
        "WHERE load_id NOT IN (SELECT load_id FROM analytics_loads_seen)"
    )
    wh.con.execute(
        "INSERT INTO analytics_state VALUES ($n, $v, $t) ON CONFLICT (name) DO UPDATE SET "
        "value = excluded.value, updated_at = excluded.updated_at",
        {"n": _STATE_KEY, "v": state, "t": datetime.now(UTC)},
    )


def _count(wh: Warehouse) -> int:
    row = wh.con.execute("SELECT count(*) FROM gpu_idle_stretches").fetchone()
    return int(row[0]) if row else 0
