"""Priority scope creep: tier shares over time, per team, and who drives the growth."""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.dashboards import figures
from preemptlens.dashboards.views_common import Charts, context, window_caption

ctx = context()
f = ctx.filters
charts = Charts()
st.title("Priority scope creep")
st.caption(window_caption(f) + " · whole weeks (Monday to Sunday) that touch the window")

shares: pl.DataFrame = ctx.q("tier_shares", f)
slopes: pl.DataFrame = ctx.q("team_slopes", f)
# The headline numbers first: they are on screen while the browser still loads the charts and tables.
weekly = (
    shares.filter(pl.col("tier").is_in(["critical", "high"]))
    .group_by("week").agg(pl.col("gpu_hour_share").sum()).sort("week")
)
growing = slopes.filter(pl.col("high_share_slope").is_not_null()).sort("high_share_slope", descending=True)
cols = st.columns(2)
if weekly.height:
    last, first = weekly.row(-1, named=True), weekly.row(0, named=True)
    cols[0].metric(
        f"Critical + high share, week of {last['week']:%Y-%m-%d}", f"{last['gpu_hour_share']:.0%}",
        delta=(f"{(last['gpu_hour_share'] - first['gpu_hour_share']) * 100:+.1f} points since the week of "
               f"{first['week']:%Y-%m-%d}") if weekly.height > 1 else None,
        delta_color="inverse", help="Of all GPU-hours in the week.",
    )
else:
    cols[0].metric("Critical + high share", "–", help="No runs in this window.")
if growing.height:
    top = growing.row(0, named=True)
    cols[1].metric("Fastest-growing team", f"{top['pool']}/{top['team']}",
                   delta=f"{top['high_share_slope'] * 100:+.1f} points per week", delta_color="inverse")
else:
    cols[1].metric("Fastest-growing team", "–", help="Fewer than two weeks of data.")

charts.add(lambda: figures.tier_shares(shares), key="tier_shares")
charts.add(lambda: figures.team_high_shares(ctx.q("team_high_shares", f)), key="team_shares")

charts.add(lambda: figures.team_slopes(slopes), key="team_slopes")
st.caption(
    "Each team's slope is the weekly change of its critical + high GPU-hours as a share of its pool's GPU-hours "
    "over the last analytics.trend_weeks weeks of data; the slopes of a pool's teams add up to the pool's."
)
st.dataframe(slopes, hide_index=True, key="slopes_table")

st.subheader("Per pool")
st.dataframe(ctx.q("scope_trend", f), hide_index=True, key="trend_table")
st.caption("unlike_critical_share: preemptors that hoarded idle GPUs or ran far longer than their tier's median.")
charts.draw()
