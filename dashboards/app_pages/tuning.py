"""Tuning: `preemptlens suggest`'s suggestions with their evidence, expected effect and config snippets."""

from __future__ import annotations

import json

import polars as pl
import streamlit as st

from preemptlens.dashboards.views_common import context, duration, md

ctx = context()
st.title("Tuning suggestions")
table: pl.DataFrame | None = ctx.q("suggestions", ctx.filters, ctx.settings.top_n)
if table is None:
    st.info("No tuning suggestions yet: this warehouse has no `suggestions` table. Run `preemptlens suggest`.")
elif table.height == 0:
    st.info("No suggestions: `preemptlens suggest` has not run yet, or found nothing worth changing.")
else:
    st.caption(
        "The latest run of `preemptlens suggest` per cluster, largest expected saving first. Each effect was "
        "measured by replaying the recorded workload under the changed setting; the cluster filter applies."
    )
    for i, s in enumerate(table.iter_rows(named=True)):
        subject = f" — {md(s['subject'])}" if s["subject"] else ""
        with st.expander(f"{i + 1}. {md(s['title'])}{subject} ({md(s['cluster'])})", expanded=i < 3):
            cols = st.columns(4)
            cols[0].metric("Setting", s["setting"])
            cols[1].metric("Now → proposed", f"{s['current_value'] or '–'} → {s['proposed_value'] or '–'}")
            cols[2].metric("Expected saving", f"{s['saving_gpu_h']:,.1f} GPU-h")
            if s["high_wait_change_s"] is not None:
                cols[3].metric("High-tier wait change", duration(abs(s["high_wait_change_s"])),
                               delta=f"{'+' if s['high_wait_change_s'] > 0 else '−'}", delta_color="inverse")
            st.markdown(f"**Evidence:** {md(s['evidence'])}")
            st.markdown(f"**Expected effect:** {md(s['effect'])}")
            st.caption(f"Window {s['window_start']:%Y-%m-%d} to {s['window_end']:%Y-%m-%d}.")
            if not s["replay_reproduces"]:
                st.warning("The replay did not reproduce this window within tolerance: read the effect as rough.")
            snippets = json.loads(s["snippets"]) if s["snippets"] else {}
            if snippets:
                tabs = st.tabs(list(snippets))
                for tab, text in zip(tabs, snippets.values(), strict=True):
                    tab.code(str(text))
