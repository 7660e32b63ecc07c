"""What `preemptlens analyze` does: settings in, idle stretches up to date, views refreshed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import polars as pl

from preemptlens.analytics import counterfactual, scorecard
from preemptlens.analytics.hoarding import StretchRefresh, infer_step, refresh_stretches
from preemptlens.analytics.params import AnalyticsSettings, param_columns, param_row
from preemptlens.analytics.views import apply_views
from preemptlens.warehouse import Warehouse, quote

if TYPE_CHECKING:
    from preemptlens.analytics.tuning import TuningSettings

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
    sample_step_s: float
    stretches: StretchRefresh
    views: list[str]
    seconds: dict[str, float] = field(default_factory=dict)
    view_seconds: dict[str, float] = field(default_factory=dict)
    # Per cluster: whether the counterfactual was replayed (and how long it took), unchanged, or why there is none.
    counterfactual: dict[str, str] = field(default_factory=dict)


def write_params(wh: Warehouse, params: AnalyticsSettings, sample_step_s: float) -> None:
    row = param_row(params, sample_step_s)
    weights = pl.DataFrame(
        {"tier": list(params.tier_weights), "weight": list(params.tier_weights.values())},
        schema={"tier": pl.String, "weight": pl.Float64},
    )
    # Redefined from the settings each time (migration 0003 only creates it for the views to read before the
    # first analyze): a warehouse of any age gets the columns of the settings in force.
    select = ", ".join(f"CAST(${c} AS {t}) AS {quote(c)}" for c, t in param_columns())
    with wh.transaction():
        wh.con.execute(f"CREATE OR REPLACE TABLE analytics_params AS SELECT {select}", row)
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
        from preemptlens.analytics.tuning import TuningSettings

        tuning = TuningSettings()
    with engine_settings(wh):
        return _analyze(wh, params, tuning, full=full)


def _analyze(wh: Warehouse, params: AnalyticsSettings, tuning: TuningSettings, *, full: bool) -> AnalyzeReport:
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    step = params.sample_step_s or infer_step(wh)
    write_params(wh, params, step)
    seconds["params"] = time.perf_counter() - started

    started = time.perf_counter()
    stretches = refresh_stretches(wh, params, step, full=full)
    seconds["idle stretches"] = time.perf_counter() - started

    started = time.perf_counter()
    view_seconds = apply_views(wh, second=False)
    seconds["views"] = time.perf_counter() - started

    started = time.perf_counter()
    replayed = counterfactual.refresh(wh, params, tuning)
    seconds["counterfactual"] = time.perf_counter() - started

    # the views that read the counterfactual (the scorecard's busy hours are read on the plain queue)
    started = time.perf_counter()
    view_seconds.update(apply_views(wh, second=True))
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
    return AnalyzeReport(step, stretches, list(view_seconds), seconds, view_seconds, replayed)
