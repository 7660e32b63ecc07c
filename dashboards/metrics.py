"""preemptlens's own figures for Prometheus: a custom collector over the readers' snapshot.

Every scrape is answered from the published snapshot (`<warehouse>.snapshot`),
never from the warehouse itself: inside `preemptlens serve` the writer jobs
hold the warehouse, and a second handle on it in the same process would clash
with theirs. Results are cached for `metrics.cache_s` seconds so that a scrape
storm (several Prometheus replicas, a dashboard refreshing) costs one read.

Gauges, not counters, throughout: every figure is recomputed from the whole
data by `preemptlens analyze`, and a re-analysis can lower it (a checkpoint
that arrives late turns an assumed loss into a smaller measured one; a
changed setting moves preemptions in or out). A counter that goes down reads
as a reset to `rate()`, which would invent a burst of losses.

Bounded cardinality: the team label carries at most `metrics.top_teams`
teams per cluster and pool (those with the largest figure) and folds the rest
into team="_other", so a family with a team label has at most
clusters x pools x (top_teams + 1) series. docs/metrics.md lists every metric.

Aggregates only, unless the scrape logs in: anyone on the machine can reach
the listener, so job ids (and a job's team and user) are served only to a
client that sends `serve.metrics_token` as a bearer token: the costliest jobs'
series on /metrics (PER_JOB) and /live-costs. With the token set, every request
needs it. The listener checks the Host header (a web page on a foreign name
that resolves here, DNS rebinding, gets nothing), bounds each connection (its
request must arrive within HEADER_TIMEOUT_S, a quiet connection is closed after
IDLE_TIMEOUT_S) and their number: MAX_CONNECTIONS in all, and PER_PEER from any
one peer (a local user, told by the kernel even on loopback, or a remote address:
preemptlens.peers), so that one user's idle or slow clients take neither serve's
threads and file descriptors nor Prometheus's turn; a connection beyond either
is answered 503 and closed at once. It can also listen on a Unix socket
(`unix:/path`), which no other local user can take over while serve is down: its
folder must be the service's (or root's) and writable by nobody else, and a path
there that is not serve's own socket is refused (docs/deploy.md).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import socket
import socketserver
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

import duckdb
import polars as pl
from prometheus_client import make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import CollectorRegistry
from prometheus_client.utils import floatToGoString

from preemptlens.analytics.livecost import LiveCostSettings, records, top
from preemptlens.config import Config, WarehouseSettings, section, setting
from preemptlens.errors import ConfigError
from preemptlens.peers import Peer, Shares, peer_of
from preemptlens.private import private_folder
from preemptlens.readonly import Limits, connect_snapshot
from preemptlens.warehouse import snapshot_path

log = logging.getLogger(__name__)

OTHER_TEAMS = "_other"
# The requeue-delay quantiles, in the order of the columns q0, q1, q2 of _REQUEUE.
QUANTILES = (0.5, 0.9, 0.99)
# Upper bounds (GPU-hours) of the live-cost histogram's buckets: fixed, so its series per pool are too.
LIVE_COST_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0)
LIVE_COSTS_PATH = "/live-costs"
# Families whose series name jobs: served only to a scrape that sends serve.metrics_token.
PER_JOB = frozenset({"preemptlens_live_cost_top_gpu_hours"})
# Seconds a client has to send its whole request; seconds a connection may stay quiet; connections at once,
# and of them from one peer (a Prometheus, nginx's user, each local user).
HEADER_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 32
PER_PEER = 8
UNIX_PREFIX = "unix:"

# Every metric family, with its help text; docs/metrics.md describes each at length.
METRICS: dict[str, str] = {
    "preemptlens_net_benefit_gpu_hours": (
        "Tier-weighted GPU-hours gained minus lost by preemptions in the last complete ISO week "
        "(net_benefit, period 'week', team '(all)'); negative when preemption cost more than it gained."
    ),
    "preemptlens_preemption_gain_gpu_hours": (
        "Tier-weighted GPU-hours preemptors gained in the last complete ISO week "
        "(net_benefit's weekly gain_weighted_gpu_s)."
    ),
    "preemptlens_preemption_cost_gpu_hours": (
        "Tier-weighted GPU-hours victims lost (redone work, requeue wait, warm-up) in the last complete ISO week "
        "(net_benefit's weekly cost_weighted_gpu_s)."
    ),
    "preemptlens_weekly_window_start_timestamp_seconds": (
        "Start (Monday 00:00 UTC) of the last complete ISO week that the weekly figures describe."
    ),
    "preemptlens_lost_gpu_hours": (
        "GPU-hours of work victims lost to preemption over all data, by victim team (preemption_ledger "
        "lost_gpu_s); a gauge because re-analysis can lower it."
    ),
    "preemptlens_preemptions": "Preemptions over all data, by victim team (rows of preemption_ledger).",
    "preemptlens_requeue_delay_seconds": (
        "Quantiles of the requeue delay (preemption to the victim's next start) of the preemptions in the last "
        "complete ISO week; censored delays (no restart yet) are left out."
    ),
    "preemptlens_requeue_delay_observed_preemptions": (
        "Preemptions in the last complete ISO week whose victim restarted (the sample of the delay quantiles)."
    ),
    "preemptlens_requeue_censored_preemptions": (
        "Preemptions in the last complete ISO week whose victim had not restarted by the data's end."
    ),
    "preemptlens_idle_hoarded_gpu_hours": (
        "GPU-hours allocated but idle in hoarding stretches over all data (idle_hoarding_runs)."
    ),
    "preemptlens_allocated_gpu_hours": (
        "GPU-hours allocated to runs over all data (stg_runs); the denominator of the idle share."
    ),
    "preemptlens_high_tier_share": (
        "Critical-plus-high share (0-1) of the pool's GPU-hours started in the last complete ISO week "
        "(scope_creep_weekly)."
    ),
    "preemptlens_high_tier_share_weekly_slope": (
        "Least-squares slope per week of the pool's critical-plus-high GPU-hour share over the last "
        "analytics.trend_weeks weeks (scope_creep_trend)."
    ),
    "preemptlens_readiness": (
        "Readiness scorecard answer per question (1 yes, 0 no, NaN unknown: the data cannot answer it): "
        "1 scarce GPUs, 2 clear priorities, 3 cheap recovery, 4 visible rules."
    ),
    "preemptlens_readiness_known": (
        "1 when the data answers the readiness question (yes or no), 0 when the answer is unknown."
    ),
    "preemptlens_readiness_yes": "Readiness questions answered yes (0-4); the verdict is preemptlens_verdict.",
    "preemptlens_readiness_unknown": (
        "Readiness questions the data cannot answer (0-4); the scorecard names the missing inputs."
    ),
    "preemptlens_readiness_borderline": (
        "1 when a readiness question's answer rests on a measure whose bootstrap interval over days holds its "
        "threshold (it could read either way), else 0."
    ),
    "preemptlens_verdict": (
        "The verdict over all the evidence (readiness_verdict), 1 for the cluster's verdict: main tool, main tool "
        "once the remaining no is fixed, not the main tool, cannot tell yet."
    ),
    "preemptlens_verdict_borderline": "1 when the verdict rests on borderline evidence, else 0.",
    "preemptlens_counterfactual_net_gpu_hours": (
        "Today's preemption against plain queueing on the same replayed jobs: tier-weighted GPU-hours of "
        "time-to-result gained (negative: it costs more than it saves), with its bootstrap bounds (bound: value, "
        "low, high) (counterfactual_runs)."
    ),
    "preemptlens_counterfactual_breakeven_factor": (
        "Multiple of the critical and high tier weights at which today's preemption breaks even against plain "
        "queueing; absent when it pays at any weight or at none (counterfactual_runs.breakeven)."
    ),
    "preemptlens_last_analyze_timestamp_seconds": (
        "When `preemptlens analyze` last computed figures (analytics_state); an analyze that finds none of its "
        "inputs changed keeps them and writes nothing."
    ),
    "preemptlens_unanalyzed_loads": "Loads written since the last analyze; their rows are not in the figures yet.",
    "preemptlens_oldest_unanalyzed_load_timestamp_seconds": (
        "When the oldest load that no analyze has taken in yet finished; absent when there is none."
    ),
    "preemptlens_data_end_timestamp_seconds": "Latest run start or end in each cluster's data (the figures' now).",
    "preemptlens_collector_last_batch_timestamp_seconds": (
        "When each collector last committed a batch for a cluster (its newest watermark update)."
    ),
    "preemptlens_snapshot_readable": (
        "1 when the last read of the snapshot gave the figures, 0 when it failed (the serve log says why)."
    ),
    "preemptlens_snapshot_timestamp_seconds": "When the snapshot the figures come from was published.",
    "preemptlens_live_cost_gpu_hours": (
        "Live preemption cost (GPU-hours: GPUs x (progress at risk + expected warm-up + expected requeue wait)) of "
        "the jobs running at the latest live-cost computation whose cost is known, per pool (live_costs_latest)."
    ),
    "preemptlens_live_cost_unknown_jobs": (
        "Jobs running at the latest live-cost computation whose cost is unknown (an input missing), per pool."
    ),
    "preemptlens_live_cost_top_gpu_hours": (
        "Live preemption cost (GPU-hours) of the live_cost.top_jobs costliest running jobs, one series each."
    ),
    "preemptlens_live_cost_computed_timestamp_seconds": "When the latest live-cost computation ran (its instant).",
}


@section(
    "metrics",
    "What `preemptlens serve` exposes on /metrics (serve.metrics_port); docs/metrics.md lists the metrics.",
)
@dataclass(frozen=True)
class MetricsSettings:
    top_teams: int = setting(
        20,
        "Teams per cluster and pool that keep their own `team` label (those with the largest figure); "
        "the rest are summed into team=\"_other\", which bounds the series to clusters x pools x (top_teams + 1).",
        bounds=(0, 10_000),
    )
    cache_s: float = setting(
        5.0,
        "Seconds a read of the snapshot answers scrapes before the next scrape reads it again.",
        bounds=(0, 3600),
    )


SETTINGS = MetricsSettings

# The window every weekly gauge covers.
_LAST_WEEK = """windows as (
    -- the last complete ISO week of each cluster's data: the week before the one that holds its end
    select cluster, date_trunc('week', max(data_end)) - interval 7 days as week_start
    from stg_runs
    group by cluster
)"""

_NET_BENEFIT = f"""
with
{_LAST_WEEK},
pools_ as (
    select distinct cluster, coalesce(pool, '(none)') as pool from net_benefit where period = 'week' and team = '(all)'
),
week as (
    select
        n.cluster, coalesce(n.pool, '(none)') as pool, n.gain_weighted_gpu_s, n.cost_weighted_gpu_s,
        n.net_weighted_gpu_s, n.preemptions
    from net_benefit as n
    inner join windows as w on w.cluster = n.cluster and n.window_start = w.week_start
    where n.period = 'week' and n.team = '(all)'
)
select
    p.cluster,
    p.pool,
    epoch(w.week_start) as week_start,
    coalesce(k.gain_weighted_gpu_s, 0) / 3600.0 as gain,
    coalesce(k.cost_weighted_gpu_s, 0) / 3600.0 as cost,
    coalesce(k.net_weighted_gpu_s, 0) / 3600.0 as net,
    coalesce(k.preemptions, 0) as preemptions
from pools_ as p
inner join windows as w on w.cluster = p.cluster
left join week as k on k.cluster = p.cluster and k.pool = p.pool
"""  # noqa: S608 -- constants only

_LOST = """
select
    cluster,
    coalesce(pool, '(none)') as pool,
    coalesce(victim_team, '(none)') as team,
    sum(lost_gpu_s) / 3600.0 as lost,
    cast(count(*) as double) as preemptions
from preemption_ledger
group by all
"""

_REQUEUE = f"""
with
{_LAST_WEEK}
select
    l.cluster,
    coalesce(l.pool, '(none)') as pool,
    quantile_cont(l.requeue_delay_s, 0.5) filter (where not l.requeue_censored) as q0,
    quantile_cont(l.requeue_delay_s, 0.9) filter (where not l.requeue_censored) as q1,
    quantile_cont(l.requeue_delay_s, 0.99) filter (where not l.requeue_censored) as q2,
    count(*) filter (where not l.requeue_censored) as observed,
    count(*) filter (where l.requeue_censored) as censored
from preemption_ledger as l
inner join windows as w on w.cluster = l.cluster
where l.time >= w.week_start and l.time < w.week_start + interval 7 days
group by all
"""  # noqa: S608 -- constants only

_IDLE = """
with allocated as (
    select cluster, coalesce(pool, '(none)') as pool, coalesce(team, '(none)') as team,
        sum(gpus * effective_s) / 3600.0 as allocated
    from stg_runs
    group by all
),
idle as (
    select cluster, coalesce(pool, '(none)') as pool, coalesce(team, '(none)') as team,
        sum(idle_gpu_hours) as idle
    from idle_hoarding_runs
    group by all
)
select
    coalesce(a.cluster, i.cluster) as cluster,
    coalesce(a.pool, i.pool) as pool,
    coalesce(a.team, i.team) as team,
    coalesce(i.idle, 0) as idle,
    coalesce(a.allocated, 0) as allocated
from allocated as a
full outer join idle as i on i.cluster = a.cluster and i.pool = a.pool and i.team = a.team
"""

_HIGH_SHARE = f"""
with
{_LAST_WEEK},
week as (
    select
        s.cluster,
        s.pool,
        sum(s.gpu_hours) filter (where s.tier in ('critical', 'high')) / nullif(sum(s.gpu_hours), 0) as share
    from scope_creep_weekly as s
    inner join windows as w on w.cluster = s.cluster and s.week = w.week_start
    group by all
)
select
    coalesce(k.cluster, t.cluster) as cluster,
    coalesce(k.pool, t.pool) as pool,
    k.share,
    t.high_gpu_hour_share_slope as slope
from week as k
full outer join scope_creep_trend as t on t.cluster = k.cluster and t.pool = k.pool
"""  # noqa: S608 -- constants only

_READINESS = """
select
    cluster,
    cast(question_no as varchar) as question,
    -- unknown is NaN, never 0 (no) and never absent (a stale series)
    coalesce(cast(answer as double), cast('nan' as double)) as answer,
    cast(answer is not null as double) as known,
    yes_count,
    unknown_count
from readiness_scorecard
"""

_READINESS_BORDERLINE = "select cluster, cast(question_no as varchar) as question, " \
    "cast(borderline as double) as borderline from readiness_scorecard"

_VERDICT = """
select cluster, verdict, 1.0 as one, cast(borderline as double) as borderline from readiness_verdict
"""

_COUNTERFACTUAL = """
select cluster, bound, value, breakeven_factor
from counterfactual_runs
cross join lateral (values ('value', net_value), ('low', net_low), ('high', net_high)) as b (bound, value)
"""

_FRESHNESS = """
select
    (select epoch(max(updated_at)) from analytics_state) as last_analyze,
    (select count(*) from _loads where load_id not in (select load_id from analytics_loads_seen)) as unanalyzed,
    (select epoch(min(coalesce(finished_at, started_at))) from _loads
        where load_id not in (select load_id from analytics_loads_seen)) as oldest_unanalyzed
"""

_DATA_END = "select cluster, epoch(max(data_end)) as data_end from stg_runs group by cluster"

_LIVE_COST_POOLS = """
select
    cluster,
    coalesce(pool, '(none)') as pool,
    list(cost_gpu_s / 3600.0) filter (where cost_gpu_s is not null) as costs,
    count(*) filter (where cost_gpu_s is null) as unknown
from live_costs_latest
group by all
"""

_LIVE_COST_COMPUTED = "select epoch(max(computed_at)) as computed_at from live_cost_computations"

_WATERMARKS = """
select collector, cluster, epoch(max(updated_at)) as updated from _watermarks group by collector, cluster
"""


def fold_teams(frame: pl.DataFrame, rank_by: str, top: int) -> pl.DataFrame:
    """Keep the `top` teams with the largest `rank_by` per cluster and pool; sum the rest into `_other`."""
    if frame.is_empty():
        return frame
    values = [c for c in frame.columns if c not in ("cluster", "pool", "team")]
    ranked = frame.with_columns(
        pl.col(rank_by)
        .rank(method="ordinal", descending=True)
        .over("cluster", "pool", order_by="team")
        .alias("_rank")
    )
    return (
        ranked.with_columns(
            pl.when(pl.col("_rank") <= top).then(pl.col("team")).otherwise(pl.lit(OTHER_TEAMS)).alias("team")
        )
        .group_by("cluster", "pool", "team", maintain_order=True)
        .agg(pl.col(values).sum())
        .sort("cluster", "pool", "team")
    )


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    frame = pl.from_arrow(con.sql(sql).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def _gauge(name: str, labels: Sequence[str], frame: pl.DataFrame, column: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, METRICS[name], labels=list(labels))
    for row in frame.iter_rows(named=True):
        if row[column] is not None:
            family.add_metric([str(row[label]) for label in labels], float(row[column]))
    return family


def _scalar(name: str, value: float | None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, METRICS[name], labels=[])
    if value is not None:
        family.add_metric([], float(value))
    return family


def live_cost_families(con: duckdb.DuckDBPyConnection, top_jobs: int) -> list[Metric]:
    """The live cost: a histogram per pool, the unknown ones per pool, the top_jobs costliest jobs."""
    histogram = HistogramMetricFamily(
        "preemptlens_live_cost_gpu_hours", METRICS["preemptlens_live_cost_gpu_hours"], labels=["cluster", "pool"]
    )
    pools = _rows(con, _LIVE_COST_POOLS)
    for row in pools.iter_rows(named=True):
        costs = row["costs"] or []
        buckets = [(floatToGoString(le), float(sum(1 for c in costs if c <= le))) for le in LIVE_COST_BUCKETS]
        buckets.append(("+Inf", float(len(costs))))
        histogram.add_metric([row["cluster"], row["pool"]], buckets, float(sum(costs)))
    costliest = top(con, top_jobs).filter(pl.col("cost_gpu_s").is_not_null()).with_columns(
        pl.col("pool").fill_null("(none)"), (pl.col("cost_gpu_s") / 3600.0).alias("cost")
    )
    return [
        histogram,
        _gauge("preemptlens_live_cost_unknown_jobs", ("cluster", "pool"), pools, "unknown"),
        _gauge("preemptlens_live_cost_top_gpu_hours", ("cluster", "pool", "job_id", "team", "tier"), costliest, "cost"),
        _scalar(
            "preemptlens_live_cost_computed_timestamp_seconds",
            _rows(con, _LIVE_COST_COMPUTED).row(0, named=True)["computed_at"],
        ),
    ]


def read_families(con: duckdb.DuckDBPyConnection, top_teams: int, top_jobs: int = 20) -> list[Metric]:
    """Every figure family from an open connection to an analysed warehouse (or its snapshot)."""
    cp = ("cluster", "pool")
    cpt = ("cluster", "pool", "team")

    net = _rows(con, _NET_BENEFIT)
    lost = fold_teams(_rows(con, _LOST), "lost", top_teams)
    requeue = _rows(con, _REQUEUE)
    idle = fold_teams(_rows(con, _IDLE), "idle", top_teams)
    share = _rows(con, _HIGH_SHARE)
    readiness = _rows(con, _READINESS)
    verdict = _rows(con, _VERDICT)
    net_counterfactual = _rows(con, _COUNTERFACTUAL)
    fresh = _rows(con, _FRESHNESS).row(0, named=True)

    delay = GaugeMetricFamily(
        "preemptlens_requeue_delay_seconds",
        METRICS["preemptlens_requeue_delay_seconds"],
        labels=["cluster", "pool", "quantile"],
    )
    for row in requeue.iter_rows(named=True):
        for i, q in enumerate(QUANTILES):
            if row[f"q{i}"] is not None:
                delay.add_metric([row["cluster"], row["pool"], f"{q:g}"], float(row[f"q{i}"]))

    return [
        _gauge("preemptlens_net_benefit_gpu_hours", cp, net, "net"),
        _gauge("preemptlens_preemption_gain_gpu_hours", cp, net, "gain"),
        _gauge("preemptlens_preemption_cost_gpu_hours", cp, net, "cost"),
        _gauge("preemptlens_weekly_window_start_timestamp_seconds", ("cluster",), net.unique("cluster"), "week_start"),
        _gauge("preemptlens_lost_gpu_hours", cpt, lost, "lost"),
        _gauge("preemptlens_preemptions", cpt, lost, "preemptions"),
        delay,
        _gauge("preemptlens_requeue_delay_observed_preemptions", cp, requeue, "observed"),
        _gauge("preemptlens_requeue_censored_preemptions", cp, requeue, "censored"),
        _gauge("preemptlens_idle_hoarded_gpu_hours", cpt, idle, "idle"),
        _gauge("preemptlens_allocated_gpu_hours", cpt, idle, "allocated"),
        _gauge("preemptlens_high_tier_share", cp, share, "share"),
        _gauge("preemptlens_high_tier_share_weekly_slope", cp, share, "slope"),
        _gauge("preemptlens_readiness", ("cluster", "question"), readiness, "answer"),
        _gauge("preemptlens_readiness_known", ("cluster", "question"), readiness, "known"),
        _gauge("preemptlens_readiness_yes", ("cluster",), readiness.unique("cluster"), "yes_count"),
        _gauge("preemptlens_readiness_unknown", ("cluster",), readiness.unique("cluster"), "unknown_count"),
        _gauge("preemptlens_readiness_borderline", ("cluster", "question"), _rows(con, _READINESS_BORDERLINE),
               "borderline"),
        _gauge("preemptlens_verdict", ("cluster", "verdict"), verdict, "one"),
        _gauge("preemptlens_verdict_borderline", ("cluster",), verdict, "borderline"),
        _gauge("preemptlens_counterfactual_net_gpu_hours", ("cluster", "bound"), net_counterfactual, "value"),
        _gauge("preemptlens_counterfactual_breakeven_factor", ("cluster",),
               net_counterfactual.unique("cluster"), "breakeven_factor"),
        _scalar("preemptlens_last_analyze_timestamp_seconds", fresh["last_analyze"]),
        _scalar("preemptlens_unanalyzed_loads", fresh["unanalyzed"]),
        _scalar("preemptlens_oldest_unanalyzed_load_timestamp_seconds", fresh["oldest_unanalyzed"]),
        _gauge("preemptlens_data_end_timestamp_seconds", ("cluster",), _rows(con, _DATA_END), "data_end"),
        _gauge(
            "preemptlens_collector_last_batch_timestamp_seconds",
            ("collector", "cluster"),
            _rows(con, _WATERMARKS),
            "updated",
        ),
        *live_cost_families(con, top_jobs),
    ]


class SnapshotCollector:
    """A prometheus-client collector that answers from the snapshot, cached for `cache_s` seconds."""

    def __init__(
        self,
        warehouse: str | Path,
        *,
        top_teams: int = 20,
        cache_s: float = 5.0,
        top_jobs: int = 20,
        endpoint_limit: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        limits: Limits | None = None,
    ) -> None:
        self.snapshot = snapshot_path(warehouse)
        self.limits = limits or Limits()
        self.top_teams = top_teams
        self.top_jobs = top_jobs
        self.endpoint_limit = endpoint_limit
        self.cache_s = cache_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: list[Metric] = []
        self._read_at: float | None = None
        self._closed = False
        self._problem: str | None = None
        self.reads = 0

    @classmethod
    def from_config(cls, config: Config) -> SnapshotCollector:
        metrics = config.of(MetricsSettings)
        live = config.of(LiveCostSettings)
        return cls(config.of(WarehouseSettings).path, top_teams=metrics.top_teams, cache_s=metrics.cache_s,
                   top_jobs=live.top_jobs, endpoint_limit=live.endpoint_limit, limits=config.of(Limits))

    def close(self) -> None:
        """Wait for a read in progress and read no more.

        Scrapes run on daemon threads; one still inside DuckDB when the
        interpreter exits is torn down mid-C++ and aborts the process.
        """
        with self._lock:
            self._closed = True

    def collect(self) -> Iterable[Metric]:
        # One reader at a time: concurrent scrapes wait for the read under way and share it.
        with self._lock:
            now = self._clock()
            stale = self._read_at is None or now - self._read_at >= self.cache_s
            if stale and not self._closed:
                self._cached = self._read()
                self._read_at = now
                self.reads += 1
            return list(self._cached)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        # The readers' own configuration (UTC, as the views' weekly windows): in serve the report job opens
        # the same snapshot, and DuckDB refuses a second configuration for a file open in one process.
        return connect_snapshot(self.snapshot, self.limits)

    def live_costs(self, limit: int, cluster: str | None = None, pool: str | None = None) -> tuple[int, dict[str, Any]]:
        """The /live-costs answer (HTTP status, JSON body): the latest computation's `limit` costliest jobs.

        Read from the snapshot under the scrapes' lock, uncached: a scheduler polling it wants the newest rows.
        """
        with self._lock:
            if self._closed:
                return 503, {"error": "stopping"}
            if not self.snapshot.exists():
                return 503, {"error": "no snapshot yet; a writer publishes it after its first commit"}
            try:
                con = self._connect()
                try:
                    frame = top(con, limit, cluster=cluster, pool=pool)
                    computed = con.execute("SELECT max(computed_at) FROM live_cost_computations").fetchall()[0][0]
                finally:
                    con.close()
            except duckdb.Error as exc:
                return 503, {"error": f"cannot read the live costs: {str(exc).splitlines()[0]}"}
        return 200, {
            "computed_at": computed.isoformat() if computed is not None else None,
            "limit": limit,
            "jobs": records(frame),
        }

    def _read(self) -> list[Metric]:
        readable = GaugeMetricFamily("preemptlens_snapshot_readable", METRICS["preemptlens_snapshot_readable"])
        if not self.snapshot.exists():
            self._report(f"no snapshot {self.snapshot} yet; a writer publishes it after its first commit")
            readable.add_metric([], 0.0)
            return [readable]
        published = _scalar("preemptlens_snapshot_timestamp_seconds", self.snapshot.stat().st_mtime)
        try:
            con = self._connect()
            try:
                families = read_families(con, self.top_teams, self.top_jobs)
            finally:
                con.close()
        except duckdb.Error as exc:
            # A snapshot from before the first analyze has no figure tables yet; say so and serve the rest.
            self._report(f"cannot read the figures from {self.snapshot}: {str(exc).splitlines()[0]}")
            readable.add_metric([], 0.0)
            return [readable, published]
        self._report(None)
        readable.add_metric([], 1.0)
        return [readable, published, *families]

    def _report(self, problem: str | None) -> None:
        # Once per change, not once per scrape: the gauge says it on every scrape already.
        if problem == self._problem:
            return
        if problem is None:
            log.info("metrics: the figures are readable again from %s", self.snapshot)
        else:
            log.warning("metrics: %s", problem)
        self._problem = problem


class _Aggregates:
    """The collector's families without those that name jobs (PER_JOB)."""

    def __init__(self, collector: SnapshotCollector) -> None:
        self.collector = collector

    def collect(self) -> Iterable[Metric]:
        return [f for f in self.collector.collect() if f.name not in PER_JOB]


def registry_for(collector: SnapshotCollector, *, per_job: bool = True) -> CollectorRegistry:
    """A registry holding only preemptlens's figures (no process or Python metrics of the default one); without
    `per_job`, only the aggregates."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector if per_job else _Aggregates(collector))
    return registry


_REASONS = {200: "200 OK", 400: "400 Bad Request", 401: "401 Unauthorized", 403: "403 Forbidden",
            405: "405 Method Not Allowed", 503: "503 Service Unavailable"}


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _host(value: str) -> str:
    """The host of a Host header, without its port ([::1]:9464 -> ::1)."""
    if value.startswith("["):
        return value[1:].split("]", 1)[0].lower()
    return value.rsplit(":", 1)[0].lower() if value.count(":") == 1 else value.lower()


def allowed_hosts(address: str, public_host: str = "") -> frozenset[str]:
    """The names a request may give in its Host header: loopback, the listening address, this machine's
    names and the dashboard's public name (a proxy that passes the Host on)."""
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname().lower(), socket.getfqdn().lower()}
    if address and not address.startswith(UNIX_PREFIX) and address not in ("0.0.0.0", "::"):
        names.add(address.lower())
    if public_host:
        names.add(_host(public_host))
    return frozenset(names)


def http_app(collector: SnapshotCollector, *, token: str | None = None,
             hosts: frozenset[str] | None = None) -> Callable[..., Iterable[bytes]]:
    """/live-costs as JSON (`limit`, `cluster`, `pool` in the query string); every other path is /metrics.
    With `token`, every request must send it (`Authorization: Bearer ...`) and gets the per-job series and
    /live-costs; without it, /metrics holds aggregates only and /live-costs is refused. A Host header not
    in `hosts` (when given) is refused."""
    everything = make_wsgi_app(registry_for(collector))
    aggregates = make_wsgi_app(registry_for(collector, per_job=False))

    def refuse(start_response: Callable[..., Any], status: int, error: str,
               headers: Sequence[tuple[str, str]] = ()) -> Iterable[bytes]:
        data = json.dumps({"error": error}).encode()
        start_response(_REASONS[status], [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                                          *headers])
        return [data]

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        host = environ.get("HTTP_HOST")
        if hosts is not None and host is not None and _host(str(host)) not in hosts:
            return refuse(start_response, 403, "this listener does not answer for that host name")
        if token is not None:
            sent = str(environ.get("HTTP_AUTHORIZATION", ""))
            if not (sent.startswith("Bearer ") and hmac.compare_digest(sent[7:].strip().encode(), token.encode())):
                return refuse(start_response, 401, "send serve.metrics_token as a bearer token",
                              [("WWW-Authenticate", 'Bearer realm="preemptlens"')])
        if environ.get("PATH_INFO") != LIVE_COSTS_PATH:
            return (everything if token is not None else aggregates)(environ, start_response)
        if token is None:
            return refuse(start_response, 403, "/live-costs names jobs: it answers only when serve.metrics_token "
                                               "is set, to a client that sends it (docs/metrics.md)")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            status, body = 405, {"error": "only GET"}
        else:
            query = parse_qs(environ.get("QUERY_STRING", ""))
            asked = _one(query, "limit")
            try:
                limit = collector.endpoint_limit if asked is None else int(asked)
            except ValueError:
                limit = 0
            if limit < 1:
                status, body = 400, {"error": f"limit: {asked!r} is not a whole number >= 1"}
            else:
                # Never more than live_cost.endpoint_limit rows, whatever was asked.
                limit = min(limit, collector.endpoint_limit)
                status, body = collector.live_costs(limit, _one(query, "cluster"), _one(query, "pool"))
        data = json.dumps(body).encode()
        start_response(_REASONS[status], [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    return app


class _Handler(WSGIRequestHandler):
    """One connection: quiet for IDLE_TIMEOUT_S, or its request not in within HEADER_TIMEOUT_S, and it is closed."""

    timeout = IDLE_TIMEOUT_S

    def setup(self) -> None:
        super().setup()
        self._late = threading.Timer(HEADER_TIMEOUT_S, self._cut)
        self._late.daemon = True
        self._late.start()

    def _cut(self) -> None:
        # A client that sends its request a byte at a time gets no longer than anyone else.
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self._late.cancel()
        return parsed

    def finish(self) -> None:
        self._late.cancel()
        with contextlib.suppress(OSError):
            super().finish()

    def address_string(self) -> str:
        return str(self.client_address[0]) if isinstance(self.client_address, tuple) else "unix"

    def get_environ(self) -> dict[str, Any]:
        if not isinstance(self.client_address, tuple):
            # A Unix socket's peer has no address; wsgiref would index into the empty string.
            self.client_address = ("unix", 0)
        return super().get_environ()

    def log_message(self, format: str, *args: Any) -> None:
        # A request line per scrape would flood serve's log; Prometheus's `up` tells whether scrapes work.
        del format, args


class _Bounded(ThreadingWSGIServer):
    """A thread per connection, at most `connections` at once and `per_peer` of them from one peer: one more is
    answered 503 and closed at once."""

    connections = MAX_CONNECTIONS
    per_peer = PER_PEER
    # A burst of connections is taken off the kernel's queue and answered, not left waiting in it.
    request_queue_size = 128

    def server_activate(self) -> None:
        self.shares = Shares(self.connections, self.per_peer)
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            peer = peer_of(request)
        except OSError:
            self.shutdown_request(request)  # gone before it was looked at
            return
        if not self.shares.take(peer):
            with contextlib.suppress(OSError):
                request.setblocking(False)
                request.send(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        try:
            threading.Thread(target=self._serve, args=(request, client_address, peer), daemon=True).start()
        except BaseException:
            self.shares.give_back(peer)
            self.shutdown_request(request)
            raise

    def _serve(self, request: Any, client_address: Any, peer: Peer) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            self.shares.give_back(peer)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went quiet or was cut off is not serve's error: no traceback on stderr.
        del request
        log.debug("metrics: a connection from %s ended early", client_address, exc_info=True)


class _UnixServer(_Bounded):
    address_family = socket.AF_UNIX

    def server_bind(self) -> None:
        path = Path(str(self.server_address))
        problem = socket_path_problem(path)
        if problem:
            raise ConfigError(f"serve.metrics_address unix:{path}: {problem}: another user could take the socket "
                              "and receive every scrape, the bearer token included",
                              "use a folder of the service's own, e.g. systemd's RuntimeDirectory= "
                              "(/run/preemptlens, 0750; docs/deploy.md)")
        with contextlib.suppress(FileNotFoundError):
            if socket_is_stale(str(path)):
                os.unlink(path)
        socketserver.TCPServer.server_bind(self)
        # The folder decides who may connect (docs/deploy.md): its owner, and the proxy's group.
        os.chmod(path, 0o660)
        self.server_name, self.server_port = "localhost", 0
        self.setup_environ()


def socket_path_problem(path: Path) -> str | None:
    """Why another user could bind `path` before serve does, or swap it afterwards; None when they cannot.

    Its folder (made 0700 when missing) and every folder above must belong to this user or root; nobody else
    may write the folder (a sticky bit does not help: the name is taken by whoever binds it first), nor a
    folder above without the sticky bit (they could move the folder away and put their own in its place). A
    path that already exists must be a socket of this user's. A local check: preemptlens.private's own ones
    are another change's."""
    me = os.geteuid()
    folder = path.parent
    if not folder.exists():
        private_folder(folder)
    # A link on the way (/tmp/run -> /run/preemptlens) is as good as its owner: another user's may be pointed
    # elsewhere later, and nginx would follow it to their socket.
    for place in (folder, *folder.parents):
        info = os.lstat(place)
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (0, me):
            return f"{place} is a link of another user (uid {info.st_uid})"
    chain = [folder.resolve(), *folder.resolve().parents]
    for place in chain:
        info = os.stat(place)
        if info.st_uid not in (0, me):
            return f"{place} belongs to another user (uid {info.st_uid})"
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and (place == chain[0] or not info.st_mode & stat.S_ISVTX):
            return f"others can write {place}"
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(info.st_mode):
        return f"{path} exists and is not a socket"
    if info.st_uid != me:
        return f"{path} is a socket of another user (uid {info.st_uid})"
    return None


def socket_is_stale(path: str) -> bool:
    """Whether `path` is a Unix socket nobody listens on (left by a serve that died); False for anything else."""
    if not stat.S_ISSOCK(os.stat(path).st_mode):
        return False
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(path)
    except OSError:
        return True
    finally:
        probe.close()
    return False


class MetricsServer:
    """/metrics and /live-costs over HTTP on a thread of its own, answered by a SnapshotCollector; `address` is
    an IP address, or `unix:/path` for a Unix socket (port ignored)."""

    def __init__(self, collector: SnapshotCollector, address: str, port: int, *, token: str | None = None,
                 public_host: str = "", max_connections: int = MAX_CONNECTIONS, per_peer: int = PER_PEER) -> None:
        app = http_app(collector, token=token, hosts=allowed_hosts(address, public_host))
        self.path = address[len(UNIX_PREFIX):] if address.startswith(UNIX_PREFIX) else None
        self.collector = collector
        self.server: _Bounded
        if self.path is not None:
            unix = type("Server", (_UnixServer,), {"connections": max_connections, "per_peer": per_peer})
            self.server = unix(self.path, _Handler)
            self.server.set_app(app)
        else:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            tcp = type("Server", (_Bounded,), {"address_family": family, "connections": max_connections,
                                               "per_peer": per_peer})
            self.server = make_server(address, port, app, tcp, handler_class=_Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.collector.close()
        self.server.server_close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.thread.join(timeout=10)
