"""Idle hoarding: who holds allocated GPUs idle, idle GPU-hours over time, and avoidable preemptions."""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.dashboards import figures
from preemptlens.dashboards.data import NO_SAMPLES, avoidable_text
from preemptlens.dashboards.views_common import Charts, context, show_table, window_caption
from preemptlens.reading.words import duration, number, plural

ctx = context()
f = ctx.filters
charts = Charts()
top_n = ctx.settings.top_n
st.title("Idle hoarding")
st.caption(window_caption(f))

head = ctx.q("headline", f)
# The headline numbers first: they are on screen while the browser still loads the tables.
cols = st.columns(3)
window = ctx.q("analysis_params").get("hoarding_window_s")
cols[0].metric("Hoarded, GPU-h", number(head["hoarded_gpu_hours"]),
               help=f"Allocated GPUs idle for at least {duration(window)} without a gap in their samples."
                    + (f" Unknown: {NO_SAMPLES}." if head["hoarded_gpu_hours"] is None else ""))
cols[1].metric("Avoidable preemptions", avoidable_text(head))
cols[2].metric("Preemptions", f"{head['preemptions']:,}")

by = st.radio("Top holders by", ("team", "user", "job"), horizontal=True, key="holder")
holders: pl.DataFrame = ctx.q("top_holders", f, by, top_n)
# The title counts the bars drawn: "Top 15 teams" over 6 bars reads as 9 missing.
shown = f"Top {top_n} {by}s" if holders.height >= top_n else f"The {plural(holders.height, by)}"
charts.add(lambda: figures.top_holders(holders, f"{shown} holding GPUs idle"), key="holders")
show_table(holders, {
    "holder": ({"team": "Team", "user": "User", "job": "Job"}[by], "text"),
    **({} if by == "team" else {"team": ("Team", "text")}),
    "idle_gpu_hours": ("Idle, GPU-h", "gpu_h"), "longest_stretch_hours": ("Longest stretch", "hours"),
    "stretches": ("Idle stretches", "int"), "runs": ("Runs", "int"),
}, key="holders_table")
st.caption(
    f"Idle GPU-hours: allocated GPUs idle for at least {duration(window)} without a gap in their samples, "
    "clipped to the window."
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
AVOIDABLE_VIEW = {
    "time": ("Preempted at", "time"), "cluster": ("Cluster", "text"), "pool": ("Pool", "text"),
    "victim_job_id": ("Victim job", "text"), "victim_team": ("Victim team", "text"),
    "victim_tier": ("Victim tier", "text"), "preemptor_job_id": ("Preemptor job", "text"),
    "preemptor_tier": ("Preemptor tier", "text"), "preemptor_gpus": ("GPUs it needed", "int"),
    "idle_gpus_in_pool": ("Idle hoarded GPUs in the pool", "int"),
    "wasted_gpu_hours": ("Work thrown away, GPU-h", "gpu_h"), "waiting_gpu_hours": ("Waiting, GPU-h", "gpu_h"),
}
if total > avoidable.height:
    st.caption(f"The newest {avoidable.height:,}; narrow the filters, or raise the rows per page "
               "(`dashboard.table_rows`), for more.")
show_table(avoidable, AVOIDABLE_VIEW, key="avoidable")
charts.draw()
