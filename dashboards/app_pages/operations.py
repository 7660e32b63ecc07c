"""Operations (admins only): how fresh each source's data is, quarantined records as their source sent them,
alerts not delivered, and what the collected data lacks (data_issues)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl
import streamlit as st

from preemptlens.dashboards.views_common import context, show_table
from preemptlens.reading.words import duration, plural, when

# What each source is, for a reader who does not know the collectors' names.
SOURCES = {
    "prometheus": "Prometheus (GPU samples)",
    "slurm": "Slurm (sacct and slurmctld log)",
    "kubernetes": "Kubernetes (events, objects, pools)",
    "import": "File import",
    "simulator": "Simulator",
}


def status(row: dict[str, Any], now: datetime, stale_s: float) -> tuple[str, str]:
    """The state of one source and why: judged by its last load (is the collector running?) and by its newest
    record (is the source itself current?)."""
    if row["last_load"] is None:
        return "no load", "No load recorded: its rows came in before loads were recorded, or by hand."
    if row["last_load_finished"] is None:
        return "failing", (f"The last load, started {duration((now - row['last_load']).total_seconds())} ago, did not "
                           "finish: see the collector's log.")
    load_age = (now - row["last_load"]).total_seconds()
    if load_age > stale_s:
        return "stale", f"Nothing loaded for {duration(load_age)}: is its collector (or `preemptlens serve`) running?"
    if row["newest_record"] is None:
        return "empty", "Loads run, but it has written no records yet."
    record_age = (now - row["newest_record"]).total_seconds()
    if record_age > stale_s:
        return "lagging", (f"Loads run, but its newest record is {duration(record_age)} old: the source itself "
                           "may have stopped reporting.")
    return "fresh", "Loading, with recent records."


ctx = context()
rows = ctx.settings.table_rows
st.title("Operations")
st.caption("Shown to admins only: raw records may hold anything a source sent, and receivers' errors name their "
           "endpoints.")

st.header("Data freshness")
now = datetime.now(UTC)
stale_s = ctx.settings.stale_after_s
fresh: pl.DataFrame = ctx.q("freshness")
if fresh.height == 0:
    st.info("No source has loaded anything yet.")
else:
    states = [status(r, now, stale_s) for r in fresh.iter_rows(named=True)]
    shown = fresh.with_columns(
        pl.col("source").replace_strict(SOURCES, default=pl.col("source"), return_dtype=pl.String).alias("name"),
        pl.Series("state", [s for s, _ in states], dtype=pl.String),
        pl.Series("why", [w for _, w in states], dtype=pl.String),
        pl.col("newest_record").map_elements(lambda t: (now - t).total_seconds(), return_dtype=pl.Float64)
        .alias("record_age_s"),
        pl.col("last_load").map_elements(lambda t: (now - t).total_seconds(), return_dtype=pl.Float64)
        .alias("load_age_s"),
    )
    bad = [r for r in shown.iter_rows(named=True) if r["state"] not in ("fresh",)]
    if bad:
        st.warning("; ".join(f"**{r['name']}**: {r['state']}" for r in bad)
                   + f" (a source is stale after {duration(stale_s)}, `dashboard.stale_after_s`).")
    else:
        st.success(f"Every source loaded within {duration(stale_s)} and has records as recent.")
    show_table(shown, {
        "name": ("Source", "text"), "state": ("State", "text"), "newest_record": ("Newest record", "time"),
        "record_age_s": ("Newest record's age", "duration"), "newest_in": ("Newest in", "text"),
        "last_load": ("Last load", "time"), "load_age_s": ("Last load's age", "duration"),
        "last_loaded": ("Rows it loaded", "int"), "last_unchanged": ("Unchanged", "int"),
        "last_quarantined": ("Quarantined", "int"), "loads": ("Loads", "int"), "tables": ("Writes", "text"),
        "why": ("Why", "text"),
    }, key="freshness")
    st.caption(f"Checked at {when(now)}. The newest record is the latest time any of the source's rows records; "
               f"the last load is its latest collection, whether or not it changed anything "
               f"({plural(int(fresh['loads'].fill_null(0).sum()), 'load')} recorded).")

st.header("Quarantined records")
quarantined = ctx.q("quarantined", rows)
if quarantined.height == 0:
    st.success("No record has been quarantined.")
else:
    # all of them by what failed: an Event's preemption its victim's state gainsays is `corroboration`
    show_table(ctx.q("quarantine_counts"), {
        "source": ("Source", "text"), "target_table": ("Meant for", "text"), "field": ("Field", "text"),
        "records": ("Records", "int"), "example": ("For example", "text"),
    }, key="quarantine_counts")
    st.caption(f"The newest {quarantined.height:,}, each with the field that failed (at most "
               "`dashboard.table_rows`).")
    show_table(quarantined, {
        "loaded_at": ("Loaded", "time"), "source": ("Source", "text"), "target_table": ("Meant for", "text"),
        "record": ("Record", "text"), "field": ("Field", "text"), "reason": ("Why", "text"),
        "raw": ("As sent", "text"), "_load_id": ("Load", "text"),
    }, key="quarantine")

st.header("Alert delivery errors")
errors = ctx.q("alert_errors", rows)
if errors is None:
    st.info("This warehouse has no alerts table yet.")
elif errors.height == 0:
    st.success("Every alert was delivered, or is waiting for its first attempt.")
else:
    show_table(errors, {
        "title": ("Alert", "text"), "rule": ("Rule", "text"), "target": ("Receiver", "text"),
        "state": ("State", "text"), "attempts": ("Attempts", "int"), "created_at": ("Raised", "time"),
        "next_attempt_at": ("Next attempt", "time"), "last_error": ("Last error", "text"),
    }, key="alert_errors")

st.header("What the data lacks")
issues = ctx.q("data_issues")
if issues is None:
    st.info("Run `preemptlens analyze` to see what the collected data lacks.")
elif issues.height == 0:
    st.success("Every preemption has its run start, pool and preemptor, and every run its job.")
else:
    st.caption("Per collector: preemptions whose run start, pool or preemptor is unknown (in the ledger, with the "
               "figures that need it unknown, never zero), preemption links whose victim was never collected "
               "(not in the ledger), and runs the figures had to correct. The view `data_issues` lists each one.")
    show_table(issues, {
        "collector": ("Collector", "text"), "issue": ("What is lacking", "text"), "records": ("Records", "int"),
        "jobs": ("Jobs", "int"), "handling": ("How the figures treat it", "text"),
    }, key="data_issues")
