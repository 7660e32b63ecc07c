"""Idle hoarding: who holds allocated GPUs idle, idle GPU-hours over time, and avoidable preemptions."""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.dashboards import figures
from preemptlens.dashboards.data import NO_SAMPLES, avoidable_text, unknown_or
from preemptlens.dashboards.views_common import Charts, context, window_caption

ctx = context()
f = ctx.filters
charts = Charts()
top_n = ctx.settings.top_n
st.title("Idle hoarding")
st.caption(window_caption(f))

head = ctx.q("headline", f)
# The headline numbers first: they are on screen while the browser still loads the tables.
cols = st.columns(3)
cols[0].metric("Hoarded GPU-hours", unknown_or(head["hoarded_gpu_hours"], "{:,.1f}", NO_SAMPLES),
               help="Allocated GPUs idle for at least the hoarding window.")
cols[1].metric("Avoidable preemptions", avoidable_text(head))
cols[2].metric("Preemptions", f"{head['preemptions']:,}")

by = st.radio("Top holders by", ("team", "user", "job"), horizontal=True, key="holder")
holders: pl.DataFrame = ctx.q("top_holders", f, by, top_n)
charts.add(lambda: figures.top_holders(holders, f"Top {top_n} {by}s holding GPUs idle"), key="holders")
st.dataframe(
    holders.drop("team") if by == "team" else holders,
    hide_index=True,
    key="holders_table",
    column_config={
        "holder": by,
        "idle_gpu_hours": st.column_config.NumberColumn("idle GPU-h", format="%.1f"),
        "longest_stretch_hours": st.column_config.NumberColumn("longest stretch h", format="%.1f"),
    },
)
st.caption(
    "Idle GPU-hours are allocated GPUs idle for at least analytics.hoarding_window_s without a gap in their "
    "samples, clipped to the window."
)

charts.add(lambda: figures.idle_daily(ctx.q("idle_daily", f), window=(f.start, f.end)), key="idle_daily")
st.caption(
    "Only unallocated GPU-hours were free to use; hoarded ones were held by a job. The team and tier "
    "filters do not apply to this chart."
)

limit = ctx.settings.table_rows
avoidable, total = ctx.q("avoidable_rows", f, limit)
st.subheader(f"Avoidable preemptions ({total:,})")
st.caption(
    "Preemptions at a time when enough GPUs in the preemptor's pool had sat idle in hoarding stretches "
    "to serve it without evicting anyone."
)
AVOIDABLE_VIEW = (
    "time",
    "cluster",
    "pool",
    "victim_job_id",
    "victim_team",
    "victim_tier",
    "preemptor_job_id",
    "preemptor_tier",
    "preemptor_gpus",
    "idle_gpus_in_pool",
    "wasted_gpu_hours",
    "waiting_gpu_hours",
)
if total > avoidable.height:
    st.caption(f"The newest {avoidable.height:,}; narrow the filters or raise dashboard.table_rows for more.")
st.dataframe(avoidable.select(AVOIDABLE_VIEW), hide_index=True, key="avoidable")
charts.draw()
