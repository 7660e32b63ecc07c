"""Priority scope creep: tier shares over time, per team, and who drives the growth."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboards import figures
from dashboards.views_common import context, window_caption

ctx = context()
f = ctx.filters
st.title("Priority scope creep")
st.caption(window_caption(f) + " · whole weeks (Monday to Sunday) that touch the window")

st.plotly_chart(figures.tier_shares(ctx.q("tier_shares", f)), key="tier_shares")
st.plotly_chart(figures.team_high_shares(ctx.q("team_high_shares", f)), key="team_shares")

slopes: pl.DataFrame = ctx.q("team_slopes", f)
st.plotly_chart(figures.team_slopes(slopes), key="team_slopes")
st.caption(
    "Each team's slope is the weekly change of its critical + high GPU-hours as a share of its pool's GPU-hours "
    "over the last analytics.trend_weeks weeks of data; the slopes of a pool's teams add up to the pool's."
)
st.dataframe(slopes, hide_index=True, key="slopes_table")

st.subheader("Per pool")
st.dataframe(ctx.q("scope_trend", f), hide_index=True, key="trend_table")
st.caption("unlike_critical_share: preemptors that hoarded idle GPUs or ran far longer than their tier's median.")
