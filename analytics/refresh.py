"""What `preemptlens analyze` does: settings in, idle stretches up to date, views refreshed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import polars as pl

from analytics.hoarding import StretchRefresh, infer_step, refresh_stretches
from analytics.params import Params, param_row
from analytics.views import apply_views
from preemptlens.warehouse import Warehouse


@dataclass
class AnalyzeReport:
    sample_step_s: float
    stretches: StretchRefresh
    views: list[str]
    seconds: dict[str, float] = field(default_factory=dict)


def write_params(wh: Warehouse, params: Params, sample_step_s: float) -> None:
    row = param_row(params, sample_step_s)
    weights = pl.DataFrame(
        {"tier": list(params.tier_weights), "weight": list(params.tier_weights.values())},
        schema={"tier": pl.String, "weight": pl.Float64},
    )
    columns = [r[0] for r in wh.con.execute("DESCRIBE analytics_params").fetchall()]
    placeholders = ", ".join(f"${c}" for c in columns)
    with wh.transaction():
        wh.con.execute("DELETE FROM analytics_params")
        wh.con.execute(f"INSERT INTO analytics_params VALUES ({placeholders})", {c: row[c] for c in columns})  # noqa: S608 -- placeholders only
        wh.con.execute("DELETE FROM analytics_tier_weights")
        wh.con.register("_weights", weights.to_arrow())
        try:
            wh.con.execute("INSERT INTO analytics_tier_weights SELECT tier, weight FROM _weights")
        finally:
            wh.con.unregister("_weights")


def analyze(wh: Warehouse, params: Params, *, full: bool = False) -> AnalyzeReport:
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    step = float(params["sample_step_s"]) or infer_step(wh)
    write_params(wh, params, step)
    seconds["params"] = time.perf_counter() - started

    started = time.perf_counter()
    stretches = refresh_stretches(wh, params, step, full=full)
    seconds["idle stretches"] = time.perf_counter() - started

    started = time.perf_counter()
    views = apply_views(wh)
    seconds["views"] = time.perf_counter() - started
    return AnalyzeReport(step, stretches, views, seconds)
