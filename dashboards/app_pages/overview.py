"""Overview: headline counts, net benefit over time, and the readiness scorecard with its evidence."""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.dashboards import figures
from preemptlens.dashboards.views_common import Charts, context, duration, window_caption

ctx = context()
f = ctx.filters
charts = Charts()
st.title("Preemption overview")
st.caption(window_caption(f))
if ctx.reader.via == "open":
    st.info(
        "No login is configured, so this dashboard listens on this host only and shows everything to whoever "
        "opens it. To share it, put it behind a login (access.proxy_headers or access.oidc, docs/deploy.md).",
        icon=":material/lock_open:",
    )

head = ctx.q("headline", f)
cols = st.columns(4)
cols[0].metric("Preemptions", f"{head['preemptions']:,}", help="Runs ended by a preemption in the window.")
cols[1].metric("Victim jobs", f"{head['victim_jobs']:,}")
cols[2].metric("Lost GPU-hours", f"{head['lost_gpu_hours']:,.1f}",
               help="Work since each victim's last checkpoint (or run start), times its GPUs.")
cols[3].metric("Median requeue delay", duration(head["median_requeue_s"]),
               help="Preemption to restart, over victims that restarted.")
cols = st.columns(4)
cols[0].metric("Victim cost GPU-hours", f"{head['cost_gpu_hours']:,.1f}",
               help="Lost work plus requeue wait plus warm-up, in GPU-hours.")
cols[1].metric("Preemptor gain GPU-hours", f"{head['gain_gpu_hours']:,.1f}",
               help="How much earlier preemptors started than by waiting for GPUs to free up.")
cols[2].metric("Avoidable preemptions", f"{head['avoidable']:,}",
               help="Enough GPUs sat idle in hoarding stretches in the pool to serve the preemptor instead.")
cols[3].metric("Hoarded GPU-hours", f"{head['hoarded_gpu_hours']:,.1f}",
               help="Allocated GPUs idle for at least the hoarding window.")
if head["not_restarted"] or head["preemptor_unknown"]:
    st.caption(
        f"{head['not_restarted']} victim(s) not restarted by the end of the data (their requeue delay runs to it); "
        f"{head['preemptor_unknown']} preemption(s) with no known preemptor."
    )

charts.add(lambda: figures.net_benefit(ctx.q("net_benefit", f), window=(f.start, f.end)), key="net_benefit")
st.caption(
    "Gains go to the preemptor's team, costs to the victim's, each weighted by its tier (analytics.tier_weights). "
    "The tier filter does not apply to this chart; the team filter selects whose gains and costs are shown."
)

st.header("Readiness scorecard")
card: pl.DataFrame = ctx.q("scorecard", f)
if card.height == 0:
    st.info("No runs in the warehouse yet: nothing to score.")
for cluster in card["cluster"].unique(maintain_order=True).to_list():
    rows = card.filter(pl.col("cluster") == cluster)
    first = rows.row(0, named=True)
    verdict = f"**{cluster}: {first['verdict']}** ({first['yes_count']} of 4 yes)"
    if first["fix_first"]:
        verdict += f" — fix first: {first['fix_first']}"
    (st.success if first["yes_count"] == 4 else st.warning)(verdict)
    st.dataframe(
        rows.select(
            pl.col("question_no").alias("#"),
            "question",
            pl.when(pl.col("answer")).then(pl.lit("yes")).otherwise(pl.lit("no")).alias("answer"),
            "evidence",
        ),
        hide_index=True,
        key=f"scorecard_{cluster}",
    )
with st.expander("Evidence behind the scorecard"):
    st.dataframe(ctx.q("evidence", f), hide_index=True, key="evidence")
st.caption("The scorecard covers all the data of each cluster; only the cluster filter applies.")
charts.draw()
