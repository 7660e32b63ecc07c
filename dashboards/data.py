"""Read-only queries behind the dashboard and the weekly report.

Everything here reads the published snapshot of the warehouse through
`preemptlens.readonly` (never the warehouse file a collector may be writing)
and only the views in sql/views, the raw dimension tables and the small
derived tables; raw GPU samples are never loaded. Every value is a bound
parameter and every SQL text is a constant: a filter left empty matches all.

`QUERIES` names every query for the dashboard's cache (dashboards.views_common),
which keys results by the snapshot's version: a new snapshot is a new key.

Masking happens here, once, where rows leave the warehouse: a `Reader` is opened for a `Scope` (whose job-level
rows its reader may see, from the login and `masking.show_other_teams_jobs`), and every frame any query returns
passes `preemptlens.reading.masking.mask` (the one rule, in the core, that the victim notices apply too) before
anything else sees it. A page gets rows only through a Reader (`Context.q` in dashboards.views_common, or
`reader(..., scope)`), so a new query or section inherits the masking without asking for it.
The pages ask for what they show, already aggregated or capped in SQL
(headline counts, one page of the ledger, the worst preemptions for the
timeline), so that neither the cache nor the browser ever holds a whole ledger.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from preemptlens.analytics.actions import HOLD_COLUMNS, hold_join
from preemptlens.analytics.requeue import ESTIMATE_COLUMNS, estimate_join
from preemptlens.analytics.views import registry
from preemptlens.analytics.whatif.scorecard import FAILED_COLUMN
from preemptlens.config import host_name, listen_address, section, setting
from preemptlens.errors import PreemptlensError
from preemptlens.reading.masking import Scope, mask
from preemptlens.readonly import Limits, Result, current_snapshot, open_reader, query

log = logging.getLogger(__name__)


@section("dashboard", "The Streamlit dashboard (`preemptlens dashboard`, or started by `preemptlens serve`).")
@dataclass(frozen=True)
class DashboardSettings:
    port: int = setting(8501, "Port `preemptlens dashboard` serves on.")
    address: str = setting(
        "127.0.0.1",
        "Address the dashboard listens on (`preemptlens dashboard` and `preemptlens serve`); "
        "anything but loopback needs a login (access.proxy_headers or access.oidc).",
        check=listen_address,
    )
    public_host: str = setting(
        "",
        "Host name readers reach the dashboard by (e.g. preemptlens.example.org, the proxy's name): "
        "connections naming any other host than it, localhost and the listening address are refused, "
        "and it is the only other origin accepted.",
        check=host_name,
    )
    default_days: int = setting(
        30, "Time window (days, ending at the newest data) a page opens with.",
        bounds=(1, 3660),
    )
    table_rows: int = setting(
        2000, "Most rows a page's table shows (the SQL page uses sql.max_rows).",
        bounds=(1, 100_000),
    )
    top_n: int = setting(15, "How many holders, teams or suggestions a top list shows.", bounds=(1, 1000))
    first_charts_wait_s: float = setting(
        0.8,
        "Seconds a reader's first page with charts holds them back, so that the browser shows the page's "
        "figures and tables before it loads plotly.js (once per browser tab; 0 sends them at once).",
        bounds=(0, 10),
    )
    gpu_hour_price: float = setting(
        0.0,
        "Price of one GPU-hour (e.g. 2.5); when set, the dashboard and the weekly report give costs and gains "
        "in money too (dashboard.currency). 0: GPU-hours only.",
        check=lambda v: None if v >= 0 else "must be 0 (no price) or more",
    )
    currency: str = setting(
        "USD", "Currency of dashboard.gpu_hour_price, written after amounts (USD, EUR, ...).",
        check=lambda v: None if 0 < len(v.strip()) <= 8 else "must be 1 to 8 characters, e.g. USD",
    )
    stale_after_s: float = setting(
        3600.0,
        "Operations flags a source whose last load, or newest record, is older than this many seconds.",
        check=lambda v: None if v > 0 else "must be more than 0",
    )
    max_connections: int = setting(
        512,
        "Connections the dashboard's front (the only way in to Streamlit: docs/deploy.md) holds at once; one more "
        "is answered 503.",
        bounds=(8, 100_000),
    )
    connections_per_peer: int = setting(
        32,
        "Of dashboard.max_connections, the most one peer holds at once: a local user (told apart even on "
        "loopback) or a remote address. A reader's browser tab takes about 7.",
        bounds=(1, 100_000),
    )
    proxy_users: list[str] = setting(
        [],
        "Local users (names or uids) whose connections count only towards dashboard.max_connections: the auth "
        "proxy on this host every reader comes through (nginx's user). A proxy on another host: "
        "access.proxy_addresses.",
    )


SETTINGS = DashboardSettings

TIER_ORDER = ("critical", "high", "normal", "low")


class NotAnalyzedError(PreemptlensError):
    """The warehouse has raw data but not (all) the views and derived tables `analyze` creates."""


@dataclass(frozen=True)
class Filters:
    """What a page shows: a half-open time window [start, end) and optional dimension filters."""

    start: datetime
    end: datetime
    clusters: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    teams: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ()
    # The team filter of the preemption queries matches the victim's team only (a team reader's view: their
    # team's preemptions, not those their team's jobs caused); else the victim's or the preemptor's.
    victim_teams: bool = False

    def params(self, *names: str) -> dict[str, object]:
        values: dict[str, object] = {
            "start": self.start,
            "end": self.end,
            "clusters": list(self.clusters),
            "pools": list(self.pools),
            "teams": list(self.teams),
            "tiers": list(self.tiers),
            "victim_teams": self.victim_teams,
        }
        return {n: values[n] for n in names}


@dataclass(frozen=True)
class Options:
    """The values the filters offer and the time span the data covers."""

    clusters: tuple[str, ...]
    pools: tuple[str, ...]
    teams: tuple[str, ...]
    tiers: tuple[str, ...]
    first: datetime | None
    last: datetime | None


@dataclass(frozen=True)
class VictimDetail:
    job: pl.DataFrame
    runs: pl.DataFrame
    preemptions: pl.DataFrame
    checkpoints: pl.DataFrame


@dataclass
class Reader:
    """The read-only connection to the current snapshot, one statement at a time, for a reader of `scope`:
    every frame it returns is masked for that scope (`mask`)."""

    con: duckdb.DuckDBPyConnection
    scope: Scope
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _tables: set[str] | None = field(default=None, repr=False)

    def frame(self, sql: str, params: Mapping[str, object] | None = None) -> pl.DataFrame:
        return mask(self._frame(sql, params), self.scope)

    def _frame(self, sql: str, params: Mapping[str, object] | None = None) -> pl.DataFrame:
        began = time.perf_counter()
        try:
            with self.lock:
                relation = self.con.sql(sql, params=dict(params)) if params else self.con.sql(sql)
                table = relation.to_arrow_table()
        except duckdb.CatalogException as exc:
            raise NotAnalyzedError(
                f"the warehouse lacks the analytics views ({str(exc).splitlines()[0]})",
                "run `preemptlens analyze` once; `preemptlens serve` keeps them fresh",
            ) from None
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        # A slow page names its slow query here (the dashboard logs at debug level with --logger.level=debug).
        log.debug("%.3f s, %d rows: %s", time.perf_counter() - began, frame.height, " ".join(sql.split())[:100])
        return frame

    def has(self, name: str) -> bool:
        if self._tables is None:
            self._tables = set(self._frame("SELECT table_name FROM information_schema.tables")["table_name"])
        return name in self._tables


@dataclass
class _OpenSnapshot:
    path: Path
    version: float
    con: duckdb.DuckDBPyConnection
    # Statements take turns on the one connection: a cursor would be a new session without the
    # UTC time zone that open_reader set, and the configuration is locked by then.
    lock: threading.Lock = field(default_factory=threading.Lock)
    readers: int = 0


# The snapshot this process has open, per warehouse and limits.
_OPEN: dict[tuple[str, Limits], _OpenSnapshot] = {}
_OPEN_CHANGED = threading.Condition()


@contextmanager
def reader(warehouse: str | Path, limits: Limits | None = None, *, scope: Scope) -> Iterator[Reader]:
    """A reader of the current snapshot for a reader of `scope` (EVERYTHING for the weekly report and the
    commands, which only the service's users run). The process keeps the snapshot it last read open and
    shares its connection between readers: opening the file for every query would re-read its
    catalog and start with an empty block cache (0.15-0.3 s each on the 4,096-GPU warehouse).

    DuckDB gives a new connection to a path the database already open under that path, even when
    a new snapshot has been renamed over it since. So a newer snapshot is opened only once the
    readers of the old one have finished, and the old one is closed first."""
    limits = limits or Limits()
    key = (str(Path(warehouse).resolve()), limits)
    with _OPEN_CHANGED:
        snapshot = current_snapshot(warehouse, limits.wait_s)
        version = snapshot.stat().st_mtime
        deadline = time.monotonic() + limits.wait_s
        while (kept := _OPEN.get(key)) is None or (kept.path, kept.version) != (snapshot, version):
            left = deadline - time.monotonic()
            if kept is not None and kept.readers and left > 0:
                _OPEN_CHANGED.wait(left)
                continue
            if kept is not None and not kept.readers:
                kept.con.close()
            # A reader stuck past the wait keeps its old database (and this connection may get it too).
            _OPEN[key] = _OpenSnapshot(snapshot, version, open_reader(warehouse, limits))
        kept.readers += 1
    try:
        yield Reader(kept.con, scope, kept.lock)
    finally:
        with _OPEN_CHANGED:
            kept.readers -= 1
            _OPEN_CHANGED.notify_all()


def adhoc(warehouse: str | Path, sql: str, limits: Limits) -> Result:
    """One guarded ad-hoc query (preemptlens.readonly: one SELECT-shaped statement, run read-only in a child
    process killed at the deadline, with caps on memory, rows and bytes)."""
    return query(warehouse, sql, limits)


def snapshot_version(warehouse: str | Path, limits: Limits | None = None) -> float:
    """Modification time of the snapshot readers see now; the cache key of every query."""
    return current_snapshot(warehouse, (limits or Limits()).wait_s).stat().st_mtime


def _has(values: str, column: str) -> str:
    """SQL: `column` is one of the list parameter `$values`."""
    return f"list_contains(CAST(${values} AS VARCHAR[]), {column})"


def _in(values: str, column: str) -> str:
    """SQL of a dimension filter: `column` is one of the list parameter `$values`, or the list is empty (a filter
    left empty matches every row). Queries build their text with it once, at import: every SQL text stays a
    constant and every value a bound parameter."""
    return f"(len(CAST(${values} AS VARCHAR[])) = 0 OR {_has(values, column)})"



_OPTIONS_SQL = {
    "clusters": "SELECT DISTINCT cluster AS v FROM job_runs ORDER BY 1",
    "pools": "SELECT DISTINCT pool AS v FROM pools UNION SELECT DISTINCT pool FROM job_runs WHERE pool IS NOT NULL "
    "ORDER BY 1",
    "teams": "SELECT DISTINCT team AS v FROM jobs WHERE team IS NOT NULL ORDER BY 1",
    "tiers": "SELECT DISTINCT tier AS v FROM jobs ORDER BY 1",
}


def options(r: Reader) -> Options:
    found = {key: tuple(r.frame(sql)["v"].to_list()) for key, sql in _OPTIONS_SQL.items()}
    span = r.frame(
        "SELECT min(start_time) AS first, max(greatest(coalesce(end_time, start_time), start_time)) AS last "
        "FROM job_runs"
    ).row(0)
    tiers = tuple(t for t in TIER_ORDER if t in found["tiers"])
    return Options(found["clusters"], found["pools"], found["teams"], tiers, span[0], span[1])


_LEDGER_COLUMNS = """
    time, cluster, pool, victim_job_id, victim_run, victim_team, victim_user, victim_tier, victim_gpus,
    preemptor_job_id, preemptor_run, preemptor_team, preemptor_tier, preemptor_gpus, reason, basis,
    progress_source,
    run_start, last_checkpoint_time, lost_s, lost_gpu_s / 3600.0 AS lost_gpu_hours,
    restart_run, restart_time, requeue_delay_s, requeue_censored, requeue_gpu_s / 3600.0 AS requeue_gpu_hours,
    warmup_s, warmup_gpu_s / 3600.0 AS warmup_gpu_hours, recovery_s,
    wasted_gpu_s / 3600.0 AS wasted_gpu_hours, requeue_gpu_s / 3600.0 AS waiting_gpu_hours,
    gain_gpu_s / 3600.0 AS gain_gpu_hours, gain_censored, avoidable, idle_gpus_in_pool,
    early_victim, near_completion, repeat_victim, work_done_share, prior_job_preemptions
"""

_LEDGER_WHERE = f"""
    {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
    AND ({_in("teams", "victim_team")}
         OR (NOT $victim_teams AND {_has("teams", "preemptor_team")}))
    AND ({_in("tiers", "victim_tier")}
         OR {_has("tiers", "preemptor_tier")})
    AND time >= $start AND time < $end
"""

LEDGER_SQL = f"""
SELECT {_LEDGER_COLUMNS} FROM preemption_ledger WHERE {_LEDGER_WHERE} ORDER BY time DESC
"""  # noqa: S608 -- constants only
_LEDGER_PARAMS = ("clusters", "pools", "teams", "tiers", "start", "end", "victim_teams")
_STRETCH_PARAMS = ("clusters", "pools", "teams", "tiers", "start", "end")


def ledger(r: Reader, f: Filters) -> pl.DataFrame:
    """Every preemption the filters select, newest first. The ledger view is the costliest read of
    the dashboard, so it is read once per filter and the pages' counts and lists derive from it."""
    return r.frame(LEDGER_SQL, f.params(*_LEDGER_PARAMS))


HEADLINE_SQL = f"""
SELECT
    count(*) AS preemptions,
    count(DISTINCT (cluster, victim_job_id)) AS victim_jobs,
    coalesce(sum(lost_gpu_s / 3600.0), 0) AS lost_gpu_hours,
    coalesce(sum(wasted_gpu_s / 3600.0), 0) AS wasted_gpu_hours,
    coalesce(sum(requeue_gpu_s / 3600.0), 0) AS waiting_gpu_hours,
    coalesce(sum(gain_gpu_s / 3600.0), 0) AS gain_gpu_hours,
    median(requeue_delay_s) FILTER (WHERE NOT requeue_censored) AS median_requeue_s,
    count(*) FILTER (WHERE requeue_censored) AS not_restarted,
    count(*) FILTER (WHERE avoidable) AS avoidable,
    count(*) FILTER (WHERE avoidable IS NULL) AS avoidable_unknown,
    count(*) FILTER (WHERE preemptor_job_id IS NULL) AS preemptor_unknown
FROM preemption_ledger
WHERE {_LEDGER_WHERE}
"""  # noqa: S608 -- constants only


def headline(r: Reader, f: Filters) -> dict[str, Any]:
    """The overview's and the weekly report's counts, by the warehouse: the cost in its two currencies, work
    thrown away (lost + warm-up) and waiting (victim GPUs x requeue delay), beside the gain."""
    counts = r.frame(HEADLINE_SQL, f.params(*_LEDGER_PARAMS)).row(0, named=True)
    return {**counts, "hoarded_gpu_hours": hoarded(r, f)}


# The victim's live cost at the preemption and whether a cheaper victim was running (preemption_live_costs).
_LIVE_COST_COLUMNS = """
    c.victim_cost_gpu_s / 3600.0 AS victim_live_cost_gpu_hours, c.victim_cost_computed_at, c.victim_cost_unknown,
    c.cheaper_victim_running, c.cheaper_job_id, c.cheaper_team, c.cheaper_gpus,
    c.cheaper_cost_gpu_s / 3600.0 AS cheaper_live_cost_gpu_hours
"""
_LIVE_COST_JOIN = """
LEFT JOIN preemption_live_costs AS c
    ON c.cluster = l.cluster AND c.victim_job_id = l.victim_job_id AND c.victim_run = l.victim_run
"""

LEDGER_PAGE_SQL = f"""
SELECT l.*, {_LIVE_COST_COLUMNS}
FROM (
    SELECT {_LEDGER_COLUMNS} FROM preemption_ledger WHERE {_LEDGER_WHERE}
    ORDER BY time DESC, cluster, victim_job_id, victim_run
    LIMIT $limit OFFSET $offset
) AS l
{_LIVE_COST_JOIN}
ORDER BY l.time DESC, l.cluster, l.victim_job_id, l.victim_run
"""  # noqa: S608 -- constants only


def ledger_page(r: Reader, f: Filters, limit: int, offset: int) -> pl.DataFrame:
    """Rows `offset` to `offset + limit` of `ledger` (newest first, ties in a fixed order)."""
    return r.frame(LEDGER_PAGE_SQL, {**f.params(*_LEDGER_PARAMS), "limit": limit, "offset": offset})


WORST_SQL = f"""
SELECT {_LEDGER_COLUMNS}
FROM preemption_ledger WHERE {_LEDGER_WHERE}
ORDER BY wasted_gpu_hours DESC NULLS LAST, waiting_gpu_hours DESC NULLS LAST, time, cluster, victim_job_id, victim_run
LIMIT $limit
"""  # noqa: S608 -- constants only


def worst(r: Reader, f: Filters, limit: int) -> pl.DataFrame:
    """The `limit` worst preemptions: most work thrown away first, then most waiting (the dashboard's timeline
    and the weekly report's "worst preemptions")."""
    return r.frame(WORST_SQL, {**f.params(*_LEDGER_PARAMS), "limit": limit})


VICTIMS_SQL = f"""
SELECT cluster, victim_job_id, any_value(victim_team) AS victim_team, count(*) AS preemptions,
    coalesce(sum(wasted_gpu_s / 3600.0), 0) AS wasted_gpu_hours,
    coalesce(sum(requeue_gpu_s / 3600.0), 0) AS waiting_gpu_hours
FROM preemption_ledger WHERE {_LEDGER_WHERE}
GROUP BY cluster, victim_job_id
ORDER BY wasted_gpu_hours DESC, waiting_gpu_hours DESC, victim_job_id, cluster
LIMIT $limit
"""  # noqa: S608 -- constants only


def top_victims(r: Reader, f: Filters, limit: int) -> pl.DataFrame:
    """The victim jobs of the filtered ledger, the `limit` with the most work thrown away (then waiting)."""
    return r.frame(VICTIMS_SQL, {**f.params(*_LEDGER_PARAMS), "limit": limit})


AVOIDABLE_SQL = f"""
SELECT {_LEDGER_COLUMNS}, count(*) OVER () AS total
FROM preemption_ledger WHERE avoidable AND {_LEDGER_WHERE}
ORDER BY time DESC, cluster, victim_job_id, victim_run
LIMIT $limit
"""  # noqa: S608 -- constants only


def avoidable_rows(r: Reader, f: Filters, limit: int) -> tuple[pl.DataFrame, int]:
    """The newest `limit` rows of `avoidable` and how many there are in all."""
    rows = r.frame(AVOIDABLE_SQL, {**f.params(*_LEDGER_PARAMS), "limit": limit})
    total = int(rows["total"][0]) if rows.height else 0
    return rows.drop("total"), total


NO_SAMPLES = "no GPU samples: hoarding unknown"


def unknown_or(value: float | None, fmt: str, missing: str) -> str:
    """The value formatted, or 'unknown' with the missing input named."""
    return f"unknown ({missing})" if value is None else fmt.format(value)


def avoidable_text(head: dict[str, Any]) -> str:
    """The avoidable count of `data.headline`; unknown for the preemptions of clusters without GPU samples."""
    known = int(head["avoidable"])
    unknown = int(head["avoidable_unknown"])
    if unknown and unknown == int(head["preemptions"]):
        return f"unknown ({NO_SAMPLES})"
    return f"{known:,}" + (f" (+{unknown:,} unknown)" if unknown else "")


# The hoarding stretches the filters select that overlap the window.
_STRETCHES = f"""FROM hoarding_stretches
WHERE {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
    AND {_in("teams", "team")}
    AND {_in("tiers", "tier")}
    AND start_time < $end AND end_time > $start
"""

HOARDED_SQL = f"""
SELECT CASE WHEN EXISTS (
        -- hoarding is unknown (null), not 0, when none of the clusters has GPU samples
        SELECT 1 FROM readiness_evidence
        WHERE measure = 'hoarded_share_of_allocated' AND missing IS NULL
            AND {_in("clusters", "cluster")})
    THEN coalesce(sum(greatest(0, epoch(least(end_time, $end)) - epoch(greatest(start_time, $start)))), 0) / 3600.0
    END AS hoarded_gpu_hours
{_STRETCHES}"""  # noqa: S608 -- constants only


def hoarded(r: Reader, f: Filters) -> float | None:
    """GPU-hours of hoarding stretches (allocated GPUs idle at least the hoarding window), clipped to the window;
    None when no selected cluster has GPU samples."""
    value = r.frame(HOARDED_SQL, f.params(*_STRETCH_PARAMS))["hoarded_gpu_hours"][0]
    return None if value is None else float(value)


# The ledger's gains and costs summed over net_benefit's rows, in GPU-hours and in tier-weighted GPU-hours (the
# `*_value` columns: net = gain - cost): what the daily chart and the per-team table both show.
_NET_SUMS = """
    CAST(sum(preemptions) AS BIGINT) AS preemptions,
    sum(gain_gpu_s) / 3600.0 AS gain_gpu_hours,
    sum(lost_gpu_s + warmup_gpu_s) / 3600.0 AS wasted_gpu_hours,
    sum(requeue_gpu_s) / 3600.0 AS waiting_gpu_hours,
    sum(gain_weighted_gpu_s) / 3600.0 AS gain_value,
    sum(cost_weighted_gpu_s) / 3600.0 AS cost_value,
    sum(net_weighted_gpu_s) / 3600.0 AS net_value"""

NET_BENEFIT_SQL = f"""
SELECT
    window_start AS day,{_NET_SUMS}
FROM net_benefit
WHERE period = 'day'
    AND {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
    AND ((len(CAST($teams AS VARCHAR[])) = 0 AND team = '(all)') OR {_has("teams", "team")})
    AND window_start >= date_trunc('day', $start) AND window_start < $end
GROUP BY window_start
ORDER BY window_start
"""  # noqa: S608 -- constants only


def net_benefit(r: Reader, f: Filters) -> pl.DataFrame:
    """Per day: gains and costs in GPU-hours and in tier-weighted GPU-hours (net = gain - cost)."""
    return r.frame(NET_BENEFIT_SQL, f.params("clusters", "pools", "teams", "start", "end"))


_CLUSTERS = _in("clusters", "cluster")
SCORECARD_SQL = f"""
SELECT s.cluster, s.question_no, s.question, s.answer, s.borderline, s.missing, s.yes_count, s.no_count,
    s.unknown_count, s.unanswered, s.collect, v.verdict, v.borderline AS verdict_borderline, v.reasons, v.fix_first,
    v.adoption, {FAILED_COLUMN}
FROM readiness_scorecard AS s
LEFT JOIN readiness_verdict AS v ON v.cluster = s.cluster
WHERE {_in("clusters", "s.cluster")}
ORDER BY s.cluster, s.question_no
"""  # noqa: S608 -- constants only
EVIDENCE_SQL = f"""
SELECT cluster, question_no, measure, value, low, high, comparison, threshold, rule, passes, borderline, missing
FROM readiness_evidence
WHERE {_CLUSTERS}
ORDER BY cluster, question_no, rule, measure
"""  # noqa: S608 -- constants only
COUNTERFACTUAL_SQL = {  # constants only
    "runs": f"SELECT * FROM counterfactual_runs WHERE {_CLUSTERS} ORDER BY cluster",  # noqa: S608
    "scenarios": f"SELECT * FROM counterfactual_scenarios WHERE {_CLUSTERS} "  # noqa: S608
                 "ORDER BY cluster, trigger_wait_s NULLS FIRST, scenario",
    "figures": f"SELECT * FROM counterfactual_figures WHERE {_CLUSTERS} ORDER BY cluster, scenario, tier",  # noqa: S608
}
VERDICT_SQL = f"SELECT * FROM readiness_verdict WHERE {_CLUSTERS} ORDER BY cluster"  # noqa: S608 -- constants only


def scorecard(r: Reader, f: Filters) -> pl.DataFrame:
    """The four questions per cluster, with the cluster's verdict (readiness_verdict) on every row."""
    return r.frame(SCORECARD_SQL, f.params("clusters"))


def evidence(r: Reader, f: Filters) -> pl.DataFrame:
    return r.frame(EVIDENCE_SQL, f.params("clusters"))


def counterfactual(r: Reader, f: Filters) -> dict[str, pl.DataFrame]:
    """The counterfactual headline's stored rows (analytics/whatif/counterfactual.py): runs, scenarios, figures."""
    return {name: r.frame(sql, f.params("clusters")) for name, sql in COUNTERFACTUAL_SQL.items()}


HAZARD_SQL = f"""
SELECT cluster, tier, age_from_s, age_to_s, runs_at_risk, preemptions, censored, exposure_h,
    hazard_per_h, hazard_low_per_h, hazard_high_per_h
FROM preemption_hazard
WHERE level = 'tier' AND {_CLUSTERS} AND (len($tiers) = 0 OR list_contains($tiers, tier))
ORDER BY cluster, tier, age_from_s
"""  # noqa: S608 -- constants only


def hazard(r: Reader, f: Filters) -> pl.DataFrame:
    """The preemption hazard by run age per victim tier, over every recorded run (not the window's)."""
    return r.frame(HAZARD_SQL, f.params("clusters", "tiers"))


RESTART_CAUSES_SQL = f"""
SELECT team, cause, cause_by, sum(runs) AS runs, sum(restarts) AS restarts, sum(run_gpu_h) AS run_gpu_h,
    sum(silent_gpu_h) AS silent_gpu_h
FROM restart_causes
WHERE level = 'team' AND ({_CLUSTERS})
    AND (len(CAST($teams AS VARCHAR[])) = 0 OR list_contains(CAST($teams AS VARCHAR[]), team))
    AND day >= date_trunc('day', $start) AND day < $end
GROUP BY team, cause, cause_by
ORDER BY team, runs DESC, cause, cause_by
"""  # noqa: S608 -- constants only


def restart_causes(r: Reader, f: Filters) -> pl.DataFrame:
    """How the window's runs ended, per team, cause other than completion and who asked for it (run_ends,
    restart_causes)."""
    return r.frame(RESTART_CAUSES_SQL, f.params("clusters", "teams", "start", "end"))


def verdicts(r: Reader, f: Filters) -> pl.DataFrame:
    return r.frame(VERDICT_SQL, f.params("clusters"))


def victim_detail(r: Reader, cluster: str, job_id: str) -> VictimDetail:
    key = {"c": cluster, "j": job_id}
    return VictimDetail(
        job=r.frame(
            "SELECT job_id, name, team, user_name, priority_class, tier, preemptible, pool, gpus, submit_time, "
            "checkpoint_interval_s, work_s, source FROM jobs WHERE cluster = $c AND job_id = $j",
            key,
        ),
        runs=r.frame(
            # Each run with whose it is and whose its preemptor was, so that masking can tell (mask).
            "SELECT r.run, r.pool, r.hosts, r.gpus, r.submit_time, r.eligible_time, r.start_time, r.end_time, "
            "r.state, r.preemptor_job_id, p.team AS preemptor_team, r.reason, j.team "
            "FROM job_runs AS r LEFT JOIN jobs AS j ON j.cluster = r.cluster AND j.job_id = r.job_id "
            "LEFT JOIN jobs AS p ON p.cluster = r.cluster AND p.job_id = r.preemptor_job_id "
            "WHERE r.cluster = $c AND r.job_id = $j ORDER BY r.run",
            key,
        ),
        preemptions=r.frame(
            # with the expected requeue wait of the victim's group, for a victim not restarted yet
            f"SELECT l.*, {_LIVE_COST_COLUMNS}, {ESTIMATE_COLUMNS} FROM (SELECT {_LEDGER_COLUMNS} "  # noqa: S608 -- constants only
            f"FROM preemption_ledger WHERE cluster = $c AND victim_job_id = $j) AS l {_LIVE_COST_JOIN} "
            f"{estimate_join('l.cluster', 'l.pool', 'l.victim_tier', 'l.victim_gpus')} ORDER BY l.time",
            key,
        ),
        checkpoints=r.frame(
            "SELECT c.run, c.time, c.kind, c.step, j.team FROM checkpoints AS c "
            "LEFT JOIN jobs AS j ON j.cluster = c.cluster AND j.job_id = c.job_id "
            "WHERE c.cluster = $c AND c.job_id = $j ORDER BY c.time LIMIT 5000",
            key,
        ),
    )


_HOLDER_SQL = """
SELECT
    {holder} AS holder,
    any_value(team) AS team,
    sum(greatest(0, epoch(least(end_time, $end)) - epoch(greatest(start_time, $start)))) / 3600.0 AS idle_gpu_hours,
    max(idle_s) / 3600.0 AS longest_stretch_hours,
    count(*) AS stretches,
    count(DISTINCT cluster || '/' || job_id || '/' || run) AS runs
""" + _STRETCHES + """GROUP BY {holder}
ORDER BY idle_gpu_hours DESC, holder
LIMIT $limit
"""
HOLDER_SQL = {
    "team": _HOLDER_SQL.format(holder="team"),
    "user": _HOLDER_SQL.format(holder="user_name"),
    "job": _HOLDER_SQL.format(holder="job_id"),
}


def top_holders(r: Reader, f: Filters, by: str, limit: int) -> pl.DataFrame:
    """Who held allocated GPUs idle in hoarding stretches, clipped to the window."""
    return r.frame(HOLDER_SQL[by], {**f.params(*_STRETCH_PARAMS), "limit": limit})


IDLE_DAILY_SQL = f"""
SELECT
    day,
    sum(capacity_gpu_hours) AS capacity_gpu_hours,
    sum(allocated_gpu_hours) AS allocated_gpu_hours,
    sum(unallocated_gpu_hours) AS unallocated_gpu_hours,
    sum(hoarded_gpu_hours) AS hoarded_gpu_hours
FROM unallocated_idle
WHERE {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
    AND day >= date_trunc('day', $start) AND day < $end
GROUP BY day
ORDER BY day
"""  # noqa: S608 -- constants only


def idle_daily(r: Reader, f: Filters) -> pl.DataFrame:
    """Per day: hoarded (allocated but idle) and unallocated GPU-hours, kept apart."""
    return r.frame(IDLE_DAILY_SQL, f.params("clusters", "pools", "start", "end"))


# The weekly scope-creep rows the filters select, in the weeks the window touches.
_WEEKS = f"""FROM scope_creep_weekly
WHERE {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
    AND {_in("teams", "team")}
    AND week >= date_trunc('week', $start) AND week < $end
"""

TIER_SHARES_SQL = f"""
WITH weekly AS (
    SELECT week, tier, sum(gpu_hours) AS gpu_hours, CAST(sum(jobs) AS BIGINT) AS jobs
    {_WEEKS}GROUP BY week, tier
)
SELECT
    week, tier, gpu_hours, jobs,
    gpu_hours / nullif(sum(gpu_hours) OVER (PARTITION BY week), 0) AS gpu_hour_share,
    jobs / nullif(sum(jobs) OVER (PARTITION BY week), 0) AS job_share
FROM weekly
ORDER BY week, tier
"""  # noqa: S608 -- constants only
TEAM_HIGH_SHARE_SQL = f"""
SELECT
    week, team,
    sum(gpu_hours) FILTER (WHERE tier IN ('critical', 'high')) / nullif(sum(gpu_hours), 0) AS high_gpu_hour_share,
    sum(gpu_hours) AS gpu_hours
{_WEEKS}GROUP BY week, team
ORDER BY week, team
"""
TEAM_SLOPES_SQL = f"""
SELECT cluster, pool, team, high_share_slope, high_share_last, share_of_pool_growth, growth_rank
FROM scope_creep_teams
WHERE {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
    AND {_in("teams", "team")}
ORDER BY high_share_slope DESC NULLS LAST, cluster, pool, team
"""  # noqa: S608 -- constants only
TREND_SQL = f"""
SELECT *
FROM scope_creep_trend
WHERE {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
ORDER BY cluster, pool
"""  # noqa: S608 -- constants only


def tier_shares(r: Reader, f: Filters) -> pl.DataFrame:
    """Per week and tier: GPU-hours started and jobs submitted, and their shares of the week."""
    return r.frame(TIER_SHARES_SQL, f.params("clusters", "pools", "teams", "start", "end"))


def team_high_shares(r: Reader, f: Filters) -> pl.DataFrame:
    """Per week and team: the critical-plus-high share of the team's GPU-hours."""
    return r.frame(TEAM_HIGH_SHARE_SQL, f.params("clusters", "pools", "teams", "start", "end"))


def team_slopes(r: Reader, f: Filters) -> pl.DataFrame:
    return r.frame(TEAM_SLOPES_SQL, f.params("clusters", "pools", "teams"))


def scope_trend(r: Reader, f: Filters) -> pl.DataFrame:
    return r.frame(TREND_SQL, f.params("clusters", "pools"))


# The preemptions of the reader's own jobs (victim_user in $users) and of their teams' jobs, in the window, or
# of one job ($job, at any time: the job a victim notice links to).
_MINE_HITS = """
    SELECT l.*, list_contains(CAST($users AS VARCHAR[]), l.victim_user) AS own
    FROM preemption_ledger AS l
    WHERE (list_contains(CAST($users AS VARCHAR[]), l.victim_user)
            OR list_contains(CAST($teams AS VARCHAR[]), l.victim_team))
        AND CASE WHEN CAST($job AS VARCHAR) IS NULL THEN l.time >= $start AND l.time < $end
                 ELSE l.cluster = $cluster AND l.victim_job_id = $job END
"""

MINE_SQL = f"""
WITH hits AS ({_MINE_HITS}),
page_jobs AS (
    SELECT cluster, victim_job_id, bool_or(own) AS own, max(time) AS latest
    FROM hits GROUP BY cluster, victim_job_id
    ORDER BY own DESC, latest DESC, cluster, victim_job_id
    LIMIT $limit OFFSET $offset
)
SELECT
    l.time, l.cluster, l.pool, l.victim_job_id, j.name AS victim_name, l.victim_run, l.victim_user, l.victim_team,
    l.victim_tier, l.victim_gpus, l.preemptor_job_id, l.preemptor_team, l.preemptor_tier, l.preemptor_gpus,
    l.reason, l.basis, l.run_start, l.last_checkpoint_time,
    l.lost_s, l.lost_gpu_s / 3600.0 AS lost_gpu_hours,
    l.warmup_s, CASE WHEN l.warmup_s IS NOT NULL THEN l.warmup_gpu_s / 3600.0 END AS warmup_gpu_hours,
    l.wasted_gpu_s / 3600.0 AS thrown_away_gpu_hours,
    l.requeue_delay_s, l.requeue_censored, l.requeue_gpu_s / 3600.0 AS waiting_gpu_hours,
    l.restart_run, l.restart_time,
    CASE WHEN l.requeue_censored THEN l.time + to_seconds(q.expected_requeue_s) END AS expected_restart_time,
    {ESTIMATE_COLUMNS},
    j.checkpoint_interval_s, l.work_done_share, l.near_completion, p.near_completion_share,
    l.avoidable, l.idle_gpus_in_pool, l.early_victim, l.repeat_victim, l.prior_job_preemptions,
    l.own, {HOLD_COLUMNS}
FROM hits AS l
INNER JOIN page_jobs AS k ON k.cluster = l.cluster AND k.victim_job_id = l.victim_job_id
LEFT JOIN jobs AS j ON j.cluster = l.cluster AND j.job_id = l.victim_job_id
{estimate_join("l.cluster", "l.pool", "l.victim_tier", "l.victim_gpus")}
CROSS JOIN (SELECT near_completion_share FROM analytics_params LIMIT 1) AS p
{hold_join("l.cluster", "l.victim_job_id", "l.time")}
ORDER BY k.own DESC, k.latest DESC, l.cluster, l.victim_job_id, l.time DESC, l.victim_run DESC
"""  # noqa: S608 -- constants only

MINE_TOTALS_SQL = f"""
WITH hits AS ({_MINE_HITS})
SELECT
    own,
    count(*) AS preemptions,
    count(DISTINCT (cluster, victim_job_id)) AS jobs,
    sum(wasted_gpu_s) / 3600.0 AS thrown_away_gpu_hours,
    count(*) FILTER (WHERE warmup_s IS NULL) AS warmup_unknown,
    sum(requeue_gpu_s) / 3600.0 AS waiting_gpu_hours,
    count(*) FILTER (WHERE requeue_censored) AS not_restarted,
    count(*) FILTER (WHERE avoidable) AS avoidable,
    count(*) FILTER (WHERE avoidable IS NULL) AS avoidable_unknown,
    count(DISTINCT (cluster, victim_job_id)) FILTER (WHERE repeat_victim) AS repeat_jobs
FROM hits
GROUP BY own
"""  # noqa: S608 -- constants only


def _mine_params(f: Filters, users: tuple[str, ...], teams: tuple[str, ...],
                 job: tuple[str, str] | None) -> dict[str, object]:
    cluster, job_id = job or (None, None)
    return {"users": list(users), "teams": list(teams), "start": f.start, "end": f.end, "cluster": cluster,
            "job": job_id}


def mine(r: Reader, f: Filters, users: tuple[str, ...], teams: tuple[str, ...], limit: int, offset: int = 0,
         job: tuple[str, str] | None = None) -> pl.DataFrame:
    """Every preemption of one page of the reader's jobs: `limit` jobs from the `offset`-th, the reader's own
    jobs (victim_user in `users`) first, then their teams', each newest preemption first; with `job`
    (cluster, job id), that job's preemptions at any time, when it is the reader's or their team's.
    Each row has what the preemption cost the victim in two currencies never summed here: work thrown away
    (lost progress plus warm-up, GPU-hours; unknown while the warm-up is) and waiting (the victim's GPUs times
    its requeue delay, running to the end of the data when it has not restarted); the expected restart of
    one not restarted yet (preemption time plus expected_requeue's median wait for its cluster, pool, tier and
    size, with the estimate's p90, interval and victims); and
    what would have protected it (its declared checkpoint interval, its share of work done against
    analytics.near_completion_share)."""
    return r.frame(MINE_SQL, {**_mine_params(f, users, teams, job), "limit": limit, "offset": offset})


def mine_totals(r: Reader, f: Filters, users: tuple[str, ...], teams: tuple[str, ...],
                job: tuple[str, str] | None = None) -> dict[bool, dict[str, Any]]:
    """`mine`'s preemptions counted and summed over all its pages, the reader's own (True) apart from the
    rest of their teams' (False). Work thrown away counts a warm-up that was not measured as none (the
    ledger's `wasted_gpu_s`), so it is a lower bound while `warmup_unknown` is above 0."""
    rows = r.frame(MINE_TOTALS_SQL, _mine_params(f, users, teams, job))
    return {bool(row["own"]): row for row in rows.iter_rows(named=True)}


TEAM_NET_SQL = f"""
SELECT
    team,{_NET_SUMS},
    CAST(sum(gains_unknown) AS BIGINT) AS gains_unknown
FROM net_benefit
WHERE period = 'day' AND team IS DISTINCT FROM '(all)'
    AND {_in("clusters", "cluster")}
    AND {_in("pools", "pool")}
    AND {_in("teams", "team")}
    AND window_start >= date_trunc('day', $start) AND window_start < $end
GROUP BY team
ORDER BY net_value, team NULLS LAST
"""  # noqa: S608 -- constants only


def team_net(r: Reader, f: Filters) -> pl.DataFrame:
    """Per team, over the days of the window: the gain its preemptors had (GPU-hours of waiting saved), the
    cost its victims paid (work thrown away and waiting, kept apart), and the tier-weighted gain, cost and net
    of net_benefit (gains credited to the preemptor's team, costs charged to the victim's); most negative net
    first. A team that neither preempted nor was preempted has no row."""
    return r.frame(TEAM_NET_SQL, f.params("clusters", "pools", "teams", "start", "end"))


# The raw tables that grow with the fleet's size and time (a 16,384-GPU fleet samples 23.6 million GPU-minutes a
# day): their newest record per source is read source by source (`_newest_by_source`), not grouped.
_WALKED = {"gpu_samples": "GPU samples", "checkpoints": "checkpoints"}
_FIRST_SOURCE_SQL = {t: f"SELECT min(source) AS source FROM {t}" for t in _WALKED}  # noqa: S608
_NEXT_SOURCE_SQL = {t: f"SELECT min(source) AS source FROM {t} WHERE source > $after" for t in _WALKED}  # noqa: S608
_NEWEST_OF_SQL = {t: f"SELECT max(time) AS newest FROM {t} WHERE source = $source" for t in _WALKED}  # noqa: S608

FRESHNESS_SQL = """
WITH newest AS (
    SELECT unnest(CAST($sources AS VARCHAR[])) AS source, unnest(CAST($records AS VARCHAR[])) AS records,
        unnest(CAST($newest AS TIMESTAMPTZ[])) AS newest
    UNION ALL
    SELECT source, 'job runs', max(greatest(submit_time, start_time, end_time)) FROM job_runs GROUP BY source
    UNION ALL
    SELECT source, 'jobs', max(submit_time) FROM jobs GROUP BY source
    UNION ALL
    SELECT source, 'preemption links', max(time) FROM preemption_links GROUP BY source
    UNION ALL
    SELECT source, 'pool capacity', max(valid_from) FROM pools GROUP BY source
),
by_source AS (
    SELECT source, max(newest) AS newest_record, arg_max(records, newest) AS newest_in,
        string_agg(records, ', ' ORDER BY records) AS tables
    FROM newest GROUP BY source
),
loads AS (
    SELECT source, max(started_at) AS last_load, arg_max(finished_at, started_at) AS last_load_finished,
        arg_max(loaded, started_at) AS last_loaded, arg_max(unchanged, started_at) AS last_unchanged,
        arg_max(quarantined, started_at) AS last_quarantined, count(*) AS loads
    FROM _loads GROUP BY source
)
SELECT coalesce(b.source, l.source) AS source, b.tables, b.newest_record, b.newest_in, l.last_load,
    l.last_load_finished, l.last_loaded, l.last_unchanged, l.last_quarantined, l.loads
FROM by_source AS b
FULL JOIN loads AS l ON l.source = b.source
ORDER BY source
"""


def _newest_by_source(r: Reader, table: str) -> list[tuple[str, datetime | None]]:
    """Each source of `table` with its newest `time`, what `SELECT source, max(time) ... GROUP BY source` gives:
    the sources in order, each the least one after the last, then its newest time. A load's rows share their
    source, so DuckDB answers both from each row group's statistics and constant segments instead of hashing
    every row's source (a row group holding several sources is scanned). On 33 million GPU samples (16,384 GPUs,
    7 days, one every 5 minutes) the freshness query took 0.2-0.3 s instead of 0.9-1.8 s on a busy 2-core machine."""
    found: list[tuple[str, datetime | None]] = []
    source = r.frame(_FIRST_SOURCE_SQL[table])["source"][0]
    while source is not None:
        found.append((source, r.frame(_NEWEST_OF_SQL[table], {"source": source})["newest"][0]))
        source = r.frame(_NEXT_SOURCE_SQL[table], {"after": source})["source"][0]
    return found


def freshness(r: Reader) -> pl.DataFrame:
    """Per source (collector, import, simulator): the tables it wrote, its newest record (the latest time any
    of its rows records) and its last load (`_loads`: when it started, whether it finished, what it loaded)."""
    walked = [(source, records, newest) for table, records in _WALKED.items()
              for source, newest in _newest_by_source(r, table)]
    return r.frame(FRESHNESS_SQL, {"sources": [w[0] for w in walked], "records": [w[1] for w in walked],
                                   "newest": [w[2] for w in walked]})


QUARANTINE_SQL = """
SELECT q.source, q.target_table, q.record, q.field, q.reason, q.raw, q._load_id, l.started_at AS loaded_at
FROM quarantine AS q LEFT JOIN _loads AS l ON l.load_id = q._load_id
ORDER BY loaded_at DESC NULLS LAST, q.source, q.record
LIMIT $limit
"""
# Every quarantined record counted by what failed: a claim an Event's victim gainsays is field `corroboration`
# (collectors/kubernetes/corroborate.py), whatever the newest records above show.
QUARANTINE_COUNTS_SQL = """
SELECT source, target_table, field, count(*) AS records, min(reason) AS example
FROM quarantine
GROUP BY source, target_table, field
ORDER BY records DESC, source, target_table, field
"""
ALERT_ERRORS_SQL = """
SELECT rule, target, title, state, attempts, created_at, next_attempt_at, last_error
FROM alerts WHERE last_error IS NOT NULL AND state <> 'sent'
ORDER BY next_attempt_at DESC, dedupe_key
LIMIT $limit
"""


DATA_ISSUES_SQL = """
SELECT source AS collector, issue, count(*) AS records, count(DISTINCT cluster || '/' || job_id) AS jobs,
       min(handling) AS handling
FROM data_issues
GROUP BY source, issue
ORDER BY source, records DESC, issue
"""


def data_issues(r: Reader) -> pl.DataFrame | None:
    """What the data lacks, per collector and issue (docs/figures.md, data_issues); None before any analyze."""
    if not r.has("data_issues"):
        return None
    return r.frame(DATA_ISSUES_SQL)


def quarantine_counts(r: Reader) -> pl.DataFrame:
    """Every quarantined record, counted per source, table and the field that failed."""
    return r.frame(QUARANTINE_COUNTS_SQL)


def quarantined(r: Reader, limit: int) -> pl.DataFrame:
    """The newest quarantined records, raw as the source sent them (an admin's view: they may hold anything)."""
    return r.frame(QUARANTINE_SQL, {"limit": limit})


def alert_errors(r: Reader, limit: int) -> pl.DataFrame | None:
    """Alerts not delivered yet with the receiver's last error; None while the warehouse has no alerts table."""
    if not r.has("alerts"):
        return None
    return r.frame(ALERT_ERRORS_SQL, {"limit": limit})


SUGGESTIONS_TABLE = "suggestions"


SUGGESTIONS_SQL = f"""
WITH latest AS (
    SELECT cluster, max(window_end) AS window_end FROM suggestions GROUP BY cluster
)
SELECT s.*
FROM suggestions AS s
INNER JOIN latest AS l ON l.cluster = s.cluster AND l.window_end = s.window_end
WHERE {_in("clusters", "s.cluster")}
ORDER BY s.rank, s.saving_gpu_h DESC, s.cluster
LIMIT $limit
"""  # noqa: S608 -- constants only


def suggestions(r: Reader, f: Filters, limit: int) -> pl.DataFrame | None:
    """Each cluster's latest suggestions (`preemptlens suggest`) in their rank order (the readiness advice first,
    then by relative improvement; clusters interleaved rank by rank); None while there is no suggestions table."""
    if not r.has(SUGGESTIONS_TABLE):
        return None
    return r.frame(SUGGESTIONS_SQL, {**f.params("clusters"), "limit": limit})


# The scheduler a source of jobs rows implies; other sources (imports, the simulator) imply none.
_SOURCE_SCHEDULERS = {"slurm": "slurm", "kubernetes": "kubernetes"}
SCHEDULER_SQL = f"""
SELECT source, count(*) AS jobs FROM jobs
WHERE {_in("clusters", "cluster")}
GROUP BY source ORDER BY jobs DESC, source
"""  # noqa: S608 -- constants only


def scheduler_of(r: Reader, f: Filters) -> str | None:
    """The scheduler most of the selected clusters' jobs came from, when a source names one."""
    for source in r.frame(SCHEDULER_SQL, f.params("clusters"))["source"].to_list():
        if source in _SOURCE_SCHEDULERS:
            return _SOURCE_SCHEDULERS[source]
    return None


def catalog(r: Reader) -> pl.DataFrame:
    """The views and tables a query may read, each view with its one-sentence definition."""
    headers = {v.name: v.header for v in registry()}
    objects = r.frame(
        "SELECT table_name AS name, CASE WHEN table_type = 'VIEW' THEN 'view' ELSE 'table' END AS kind "
        "FROM information_schema.tables WHERE table_schema = 'main' AND NOT starts_with(table_name, '_') "
        "ORDER BY kind DESC, name"
    )
    # The views of sql/views are stored as tables by `preemptlens analyze`; list them as views.
    return objects.with_columns(
        pl.when(pl.col("name").is_in(list(headers))).then(pl.lit("view")).otherwise(pl.col("kind")).alias("kind"),
        pl.col("name").replace_strict(headers, default="", return_dtype=pl.String).alias("definition"),
    ).sort(pl.col("kind") != "view", "name")


def analysis_params(r: Reader) -> dict[str, Any]:
    """The [analytics] settings the last `analyze` computed with (analytics_params), for the pages' words."""
    rows = r.frame("SELECT * FROM analytics_params LIMIT 1")
    return rows.row(0, named=True) if rows.height else {}


# Loss coverage and goodput (docs/figures.md, section 11) over the window's days, per team (or per pool when
# only pools are selected) and over them all (the row whose `cluster` is NULL): the sums of the views' day rows,
# a part unknown (NULL) when it is unknown on any of them.
_PROGRESS_WHERE = f"""
    period = 'day' AND level = $level
    AND {_in("clusters", "cluster")}
    AND (level <> 'pool' OR {_in("pools", "pool")})
    AND (level <> 'team' OR {_in("teams", "team")})
    AND window_start >= date_trunc('day', $start) AND window_start < $end
"""

_PROGRESS_PARAMS = ("clusters", "pools", "teams", "start", "end")
# Each missing input once, whichever rows name it (a row's `missing` joins its inputs with '; ').
_MISSING = (
    "nullif(array_to_string(list_sort(list_distinct(flatten("
    "list(string_split(missing, '; ')) FILTER (WHERE missing IS NOT NULL)))), '; '), '')"
)

def _per_breakdown(view: str, figures: str, largest: str) -> str:
    """The sums `figures` of `view`'s day rows in the window, per cluster and team (or pool) and over them all, with
    the inputs missing on any of them; the largest `largest` first."""
    return f"""
SELECT
    cluster, coalesce(team, pool) AS breakdown,{figures}    {_MISSING} AS missing
FROM {view}
WHERE {_PROGRESS_WHERE}
GROUP BY GROUPING SETS ((cluster, coalesce(team, pool)), ())
ORDER BY cluster NULLS FIRST, {largest} DESC, breakdown
"""  # noqa: S608 -- constants only


COVERAGE_SQL = _per_breakdown("loss_coverage", """
    CAST(sum(preemptions) AS BIGINT) AS preemptions,
    CAST(sum(measured_preemptions) AS BIGINT) AS measured_preemptions,
    CAST(sum(checkpoint_preemptions) AS BIGINT) AS checkpoint_preemptions,
    CAST(sum(rollback_preemptions) AS BIGINT) AS rollback_preemptions,
    CAST(sum(declared_preemptions) AS BIGINT) AS declared_preemptions,
    CAST(sum(assumed_preemptions) AS BIGINT) AS assumed_preemptions,
    sum(measured_preemptions) / sum(preemptions) AS measured_share,
    sum(lost_gpu_s) / 3600.0 AS lost_gpu_hours,
    sum(measured_lost_gpu_s) / 3600.0 AS measured_lost_gpu_hours,
    sum(measured_lost_gpu_s) / nullif(sum(lost_gpu_s), 0) AS measured_lost_share,
""", "preemptions")


def _part(column: str) -> str:
    return f"CASE WHEN count({column}) = count(*) THEN sum({column}) / 3600.0 END"


GOODPUT_SQL = _per_breakdown("goodput", f"""
    sum(allocated_gpu_s) / 3600.0 AS allocated_gpu_hours,
    {_part("goodput_gpu_s")} AS goodput_gpu_hours,
    {_part("goodput_gpu_s")} / nullif(sum(allocated_gpu_s) / 3600.0, 0) AS goodput_share,
    sum(goodput_at_most_gpu_s) / nullif(sum(allocated_gpu_s), 0) AS goodput_at_most_share,
    sum(goodput_at_least_gpu_s) / nullif(sum(allocated_gpu_s), 0) AS goodput_at_least_share,
    {_part("badput_preemption_gpu_s")} AS preemption_gpu_hours,
    {_part("badput_warmup_gpu_s")} AS warmup_gpu_hours,
    {_part("badput_checkpoint_save_gpu_s")} AS checkpoint_save_gpu_hours,
    {_part("badput_idle_gpu_s")} AS idle_gpu_hours,
    {_part("badput_failure_gpu_s")} AS failure_gpu_hours,
    CAST(sum(unmeasured_preemptions) AS BIGINT) AS unmeasured_preemptions,
    CAST(sum(unmeasured_warmups) AS BIGINT) AS unmeasured_warmups,
    CAST(sum(untimed_saves) AS BIGINT) AS untimed_saves,
    CAST(sum(unmeasured_failures) AS BIGINT) AS unmeasured_failures,
""", "allocated_gpu_hours")


def progress_level(f: Filters) -> str:
    """The level the coverage and goodput tables break the selection down by: teams, or pools when only pools
    are selected (team rows cover every pool)."""
    return "pool" if f.pools and not f.teams else "team"


def coverage(r: Reader, f: Filters) -> pl.DataFrame:
    """Loss coverage of the window's preemptions: the total first (`cluster` NULL), then per team or pool."""
    return r.frame(COVERAGE_SQL, {**f.params(*_PROGRESS_PARAMS), "level": progress_level(f)})


def goodput(r: Reader, f: Filters) -> pl.DataFrame:
    """Goodput and its badput split over the window's days, in GPU-hours: the total first, then per team or pool."""
    return r.frame(GOODPUT_SQL, {**f.params(*_PROGRESS_PARAMS), "level": progress_level(f)})


QUERIES: dict[str, Callable[..., Any]] = {
    "analysis_params": analysis_params,
    "scheduler_of": scheduler_of,
    "options": options,
    "headline": headline,
    "ledger_page": ledger_page,
    "worst": worst,
    "top_victims": top_victims,
    "avoidable_rows": avoidable_rows,
    "hoarded": hoarded,
    "net_benefit": net_benefit,
    "scorecard": scorecard,
    "evidence": evidence,
    "counterfactual": counterfactual,
    "verdicts": verdicts,
    "hazard": hazard,
    "restart_causes": restart_causes,
    "ledger": ledger,
    "victim_detail": victim_detail,
    "top_holders": top_holders,
    "idle_daily": idle_daily,
    "tier_shares": tier_shares,
    "team_high_shares": team_high_shares,
    "team_slopes": team_slopes,
    "scope_trend": scope_trend,
    "suggestions": suggestions,
    "catalog": catalog,
    "mine": mine,
    "mine_totals": mine_totals,
    "team_net": team_net,
    "freshness": freshness,
    "quarantined": quarantined,
    "quarantine_counts": quarantine_counts,
    "alert_errors": alert_errors,
    "data_issues": data_issues,
    "coverage": coverage,
    "goodput": goodput,
}


def page_queries(f: Filters, *, rows: int, top_n: int, markers: int) -> tuple[tuple[Any, ...], ...]:
    """Every query the pages run when they open with these filters, as (name, *args): what the app
    warms in the background and what benchmarks/bench_dashboard.py times. `rows` is a table's page,
    `top_n` a chart's bars, `markers` the timeline's most preemptions (figures.TIMELINE_MARKERS)."""
    return (
        ("headline", f), ("net_benefit", f), ("team_net", f), ("scorecard", f), ("evidence", f), ("counterfactual", f),
        ("worst", f, markers), ("ledger_page", f, rows, 0), ("top_victims", f, rows), ("hazard", f),
        ("restart_causes", f),
        ("top_holders", f, "team", top_n), ("idle_daily", f), ("avoidable_rows", f, rows),
        ("tier_shares", f), ("team_high_shares", f), ("team_slopes", f), ("scope_trend", f),
        ("suggestions", f, top_n), ("catalog",), ("coverage", f), ("goodput", f),
    )
