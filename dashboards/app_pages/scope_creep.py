"""Priority scope creep: tier shares over time, per team, and who drives the growth."""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.dashboards import figures
from preemptlens.dashboards.views_common import Charts, context, show_table, window_caption
from preemptlens.reading.words import SHARE, change, iso_week, pct, plural

ctx = context()
f = ctx.filters
charts = Charts()
st.title("Priority scope creep")
st.caption(window_caption(f) + " · whole ISO weeks (Monday to Sunday) that touch the window")
trend_weeks = ctx.q("analysis_params").get("trend_weeks")

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
        f"Critical + high share, {iso_week(last['week'])}", pct(last["gpu_hour_share"]),
        delta=change(last["gpu_hour_share"] - first["gpu_hour_share"], SHARE) if weekly.height > 1 else None,
        delta_description=f"since {iso_week(first['week'])}" if weekly.height > 1 else None,
        delta_color="inverse", help="Of all GPU-hours started in the week.",
    )
else:
    cols[0].metric("Critical + high share", "–", help="No runs in this window.")
if growing.height:
    top = growing.row(0, named=True)
    cols[1].metric("Fastest-growing team", f"{top['pool']}/{top['team']}",
                   delta=change(top["high_share_slope"], SHARE), delta_description="per week", delta_color="inverse")
else:
    cols[1].metric("Fastest-growing team", "–", help="Fewer than two weeks of data.")

charts.add(lambda: figures.tier_shares(shares), key="tier_shares")
charts.add(lambda: figures.team_high_shares(ctx.q("team_high_shares", f)), key="team_shares")

charts.add(lambda: figures.team_slopes(slopes), key="team_slopes")
# The fit spans at most trend_weeks weeks: fewer when the data has fewer ("the last 8 weeks" over 3 misleads).
weeks = ctx.q("scope_trend", f)
had = int(weeks["weeks"].max() or 0) if weeks.height and "weeks" in weeks.columns else None
span = (f"the last {plural(min(had, trend_weeks), 'week')}" if had is not None and trend_weeks
        else f"at most the last {trend_weeks} weeks")
st.caption(
    f"Each team's growth is the weekly change of its critical + high GPU-hours as a share of its pool's GPU-hours "
    f"over {span} of data; the growths of a pool's teams add up to the pool's."
)
show_table(slopes.with_columns(pl.col("high_share_slope") * 100), {
    "growth_rank": ("Rank", "int"), "cluster": ("Cluster", "text"), "pool": ("Pool", "text"), "team": ("Team", "text"),
    "high_share_slope": ("Growth, points per week", "number"),
    "high_share_last": ("Share of the pool, last week", "pct"),
    "share_of_pool_growth": ("Share of the pool's growth", "pct"),
}, key="slopes_table")

st.subheader("Per pool")
show_table(ctx.q("scope_trend", f).with_columns(pl.col("high_gpu_hour_share_slope") * 100), {
    "cluster": ("Cluster", "text"), "pool": ("Pool", "text"), "weeks": ("Weeks", "int"),
    "first_week": ("First week", "week"), "last_week": ("Last week", "week"),
    "high_gpu_hour_share_first": ("Critical + high share, first week", "pct"),
    "high_gpu_hour_share_last": ("Critical + high share, last week", "pct"),
    "high_gpu_hour_share_slope": ("Growth, points per week", "number"),
    "preemptor_runs": ("Preemptor runs", "int"),
    "unlike_critical_share": ("Preemptors unlike critical work", "pct"),
}, key="trend_table")
st.caption("Preemptors unlike critical work: those that held a hoarding stretch or ran far longer than their tier's "
           "median completed run.")
charts.draw()
