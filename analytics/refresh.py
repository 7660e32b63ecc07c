"""What `preemptlens analyze` does: settings in, idle stretches up to date, views refreshed.

A view is recomputed only when what it is computed from changed since the analyze that stored it (`inputs`):
an analyze after nothing changed writes nothing, and one after a live-cost computation alone recomputes
only the views that read the live costs. `--full` recomputes everything."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from preemptlens import __version__
from preemptlens.analytics import attribution, hoarding, views
from preemptlens.analytics import params as params_module
from preemptlens.analytics.hoarding import StretchRefresh, infer_steps, refresh_stretches, stored_steps
from preemptlens.analytics.params import AnalyticsSettings, param_columns, param_row
from preemptlens.analytics.views import COMPUTED_TABLES, apply_views, mentions, registry
from preemptlens.analytics.whatif import counterfactual, scorecard
from preemptlens.warehouse import SQL_DIR, Warehouse, quote

if TYPE_CHECKING:
    from preemptlens.analytics.whatif.settings import TuningSettings

# For the refresh only, then restored. The views carry no ORDER BY, so their
# tables need not keep the order rows were produced in, which lets large
# CREATE TABLE AS run in parallel without buffering.
ENGINE_SETTINGS: dict[str, object] = {"preserve_insertion_order": False}
# A 30-day scan of a few thousand GPUs stays under 4 GiB with this limit
# (DuckDB spills beyond it); a lower limit already in force is kept.
MEMORY_LIMIT_BYTES = 3 * 2**30
_UNITS = {"bytes": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6,
          "gb": 10**9, "tb": 10**12}


def _bytes(setting: str) -> float | None:
    number, _, unit = setting.strip().partition(" ")
    try:
        return float(number) * _UNITS[unit.strip().lower() or "bytes"]
    except (ValueError, KeyError):
        return None


@contextmanager
def engine_settings(wh: Warehouse) -> Iterator[None]:
    def current(name: str) -> object:
        return wh.con.execute("SELECT current_setting($n)", {"n": name}).fetchall()[0][0]

    settings = dict(ENGINE_SETTINGS)
    limit = _bytes(str(current("memory_limit")))
    if limit is None or limit > MEMORY_LIMIT_BYTES:
        settings["memory_limit"] = f"{MEMORY_LIMIT_BYTES // 2**20}MiB"
    saved = {name: current(name) for name in settings}
    for name, value in settings.items():
        wh.con.execute(f"SET {name} = $v", {"v": value})
    try:
        yield
    finally:
        for name, value in saved.items():
            # A memory limit reads back rounded (`18.8 GiB`): setting that text
            # again would shrink it a little every time, so prefer the default.
            wh.con.execute(f"RESET {name}")
            if current(name) != value:
                wh.con.execute(f"SET {name} = $v", {"v": value})


@dataclass
class AnalyzeReport:
    sample_steps: dict[str, float]  # each cluster's sampling step (analytics_sample_steps)
    stretches: StretchRefresh
    views: list[str]
    seconds: dict[str, float] = field(default_factory=dict)
    view_seconds: dict[str, float] = field(default_factory=dict)
    # Views left as stored: their inputs had not changed since the analyze that built them.
    kept: list[str] = field(default_factory=list)
    # Set when nothing at all had changed: when the figures were last computed (nothing was written).
    unchanged_since: datetime | None = None
    # Per cluster: whether the counterfactual was replayed (and how long it took), unchanged, or why there is none.
    counterfactual: dict[str, str] = field(default_factory=dict)


# What `analyze` last computed from, in analytics_state: a digest of all its inputs and one per view.
INPUTS_KEY = "analyze.inputs"
# Tables the views read that analyze itself writes, from the loads and the settings alone.
_DERIVED = ("gpu_idle_stretches", "analytics_params", "analytics_sample_steps", "analytics_tier_weights")


@dataclass(frozen=True)
class Inputs:
    """Digests of what the figures are computed from: all of it, and each view's own (its SQL, the tables it
    reads, its parent views' digests; the settings and the code of every figure)."""

    overall: str
    views: dict[str, str]

    def dump(self) -> str:
        return json.dumps({"overall": self.overall, "views": self.views}, sort_keys=True)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _code() -> str:
    """The SQL and code every figure is computed by: an upgrade or an edit recomputes them all."""
    files = [p for folder in ("views", "functions", "scans") for p in sorted((SQL_DIR / folder).glob("*.sql"))]
    files += [Path(m.__file__) for m in (hoarding, attribution, views, params_module, counterfactual, scorecard)
              if m.__file__]
    files.append(Path(__file__))
    return _digest(__version__, duckdb.__version__, [(f.name, hashlib.sha256(f.read_bytes()).hexdigest())
                                                     for f in files])


def inputs(wh: Warehouse, params: AnalyticsSettings, tuning: TuningSettings | None = None) -> Inputs:
    """What the figures of this warehouse are computed from now.

    Raw tables change only through the load API, each load recorded in `_loads` (rename-cluster records
    its move as one): they count as every load's record plus their row counts (a row deleted or added
    outside the load API changes a count; a row changed in place without a load is not seen, and
    `analyze --full` recomputes regardless). A table written otherwise (the live cost's history) counts by
    a hash of its every row."""
    columns: dict[str, set[str]] = {}
    for table, column in wh.con.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main' AND "
        "table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')"
    ).fetchall():
        columns.setdefault(str(table), set()).add(str(column))
    ordered = registry()
    names = {v.name for v in ordered}
    read = {v.name: mentions(v, (t for t in columns if t not in names)) for v in ordered}
    loads = wh.con.execute(
        "SELECT count(*), coalesce(sum(hash(load_id, source, started_at, finished_at, loaded, unchanged, "
        "quarantined)), 0) FROM _loads"
    ).fetchall()[0]
    state: dict[str, object] = {}
    for table in sorted({t for tables in read.values() for t in tables}):
        if table in _DERIVED or table in COMPUTED_TABLES:
            # computed from the loads and the settings, both already in the digest: hashing its rows would
            # read the counterfactual before this analyze replays it, and change on the analyze after
            state[table] = loads
        elif "_load_id" in columns[table]:
            state[table] = (loads, wh.con.execute(f"SELECT count(*) FROM {quote(table)}").fetchall()[0][0])  # noqa: S608
        else:
            state[table] = wh.con.execute(
                f"SELECT count(*), coalesce(sum(hash(t)), 0) FROM {quote(table)} AS t"  # noqa: S608 -- a table name
            ).fetchall()[0]
    # The [tuning] policy is what the counterfactual replays: a change to it recomputes the figures.
    common = _digest(_code(), dataclasses.asdict(params), dataclasses.asdict(tuning) if tuning else None,
                     wh.schema_version())
    digests: dict[str, str] = {}
    for view in ordered:  # parents first
        parents = mentions(view, names)
        digests[view.name] = _digest(common, view.sql, [(t, state[t]) for t in read[view.name]],
                                     [digests[p] for p in parents])
    # Any load counts overall: the counterfactual replays also read raw tables no view reads (scheduler_policy).
    return Inputs(_digest(common, sorted(digests.items()), loads), digests)


def _last_inputs(wh: Warehouse) -> tuple[dict[str, Any], datetime | None]:
    row = wh.con.execute("SELECT value, updated_at FROM analytics_state WHERE name = $n",
                         {"n": INPUTS_KEY}).fetchall()
    if not row:
        return {}, None
    try:
        return dict(json.loads(row[0][0])), row[0][1]
    except (ValueError, TypeError):
        return {}, None


def write_params(wh: Warehouse, params: AnalyticsSettings, steps: Mapping[str, float]) -> None:
    """analytics_params and analytics_tier_weights from the settings, and analytics_sample_steps from `steps`
    (each cluster's sampling step, hoarding.infer_steps)."""
    row = param_row(params, steps)
    weights = pl.DataFrame(
        {"tier": list(params.tier_weights), "weight": list(params.tier_weights.values())},
        schema={"tier": pl.String, "weight": pl.Float64},
    )
    # Redefined from the settings each time (migration 0003 only creates it for the views to read before the
    # first analyze): a warehouse of any age gets the columns of the settings in force.
    select = ", ".join(f"CAST(${c} AS {t}) AS {quote(c)}" for c, t in param_columns())
    with wh.transaction():
        wh.con.execute(f"CREATE OR REPLACE TABLE analytics_params AS SELECT {select}", row)
        wh.con.execute("DELETE FROM analytics_sample_steps")
        if steps:
            wh.con.executemany("INSERT INTO analytics_sample_steps VALUES (?, ?)", list(steps.items()))
        wh.con.execute("DELETE FROM analytics_tier_weights")
        wh.con.register("_weights", weights.to_arrow())
        try:
            wh.con.execute("INSERT INTO analytics_tier_weights SELECT tier, weight FROM _weights")
        finally:
            wh.con.unregister("_weights")


def analyze(wh: Warehouse, params: AnalyticsSettings, *, full: bool = False,
            tuning: TuningSettings | None = None) -> AnalyzeReport:
    """`tuning`: the [tuning] settings naming the preemption policy in force, which the counterfactual replays
    (default: inferred from the ledger)."""
    if tuning is None:
        from preemptlens.analytics.whatif.settings import TuningSettings

        tuning = TuningSettings()
    with engine_settings(wh):
        return _analyze(wh, params, tuning, full=full)


def _analyze(wh: Warehouse, params: AnalyticsSettings, tuning: TuningSettings, *, full: bool) -> AnalyzeReport:
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    now_from = inputs(wh, params, tuning)
    last, computed_at = _last_inputs(wh)
    stored = {str(r[0]) for r in wh.con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'").fetchall()}
    kept = [] if full else [name for name, d in now_from.views.items()
                            if (last.get("views") or {}).get(name) == d and name in stored]
    seconds["inputs"] = time.perf_counter() - started
    if len(kept) == len(now_from.views) and last.get("overall") == now_from.overall:
        count = wh.con.execute("SELECT count(*) FROM gpu_idle_stretches").fetchall()[0][0]
        return AnalyzeReport(stored_steps(wh), StretchRefresh("unchanged", 0, None, int(count)), [], seconds, {}, kept,
                             computed_at)

    started = time.perf_counter()
    steps = infer_steps(wh, params.sample_step_s)
    write_params(wh, params, steps)
    seconds["params"] = time.perf_counter() - started

    started = time.perf_counter()
    stretches = refresh_stretches(wh, params, full=full)
    seconds["idle stretches"] = time.perf_counter() - started

    started = time.perf_counter()
    # The views that do not read the counterfactual; those that do are built after it (second pass).
    view_seconds = apply_views(wh, keep=kept, state={INPUTS_KEY: now_from.dump()}, second=False)
    seconds["views"] = time.perf_counter() - started

    started = time.perf_counter()
    replayed = counterfactual.refresh(wh, params, tuning)
    seconds["counterfactual"] = time.perf_counter() - started

    # the views that read the counterfactual (the scorecard's busy hours are read on the plain queue), kept
    # like the others unless a replay rewrote what they read
    started = time.perf_counter()
    fresh = any(done.startswith("replayed") for done in replayed.values())
    view_seconds.update(apply_views(wh, keep=() if fresh else kept, second=True))
    seconds["views"] += time.perf_counter() - started

    started = time.perf_counter()
    scorecard.refresh(wh)
    seconds["verdict"] = time.perf_counter() - started
    # Readers (the dashboard, /metrics) tell fresh figures from stale ones by this row.
    wh.con.execute(
        "INSERT INTO analytics_state VALUES ('analyze.finished_at', '', $t) ON CONFLICT (name) DO UPDATE SET "
        "value = excluded.value, updated_at = excluded.updated_at",
        {"t": datetime.now(UTC)},
    )
    wh.mark_changed()
    return AnalyzeReport(steps, stretches, list(view_seconds), seconds, view_seconds, kept, counterfactual=replayed)
