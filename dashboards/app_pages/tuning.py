"""Tuning: `preemptlens suggest`'s suggestions with their evidence, expected effect and config snippets."""

from __future__ import annotations

import json

import polars as pl
import streamlit as st

from preemptlens.dashboards.views_common import context, md
from preemptlens.reading.words import DURATION, change, duration, gpu_hours, number, window

ctx = context()
st.title("Tuning suggestions")
table: pl.DataFrame | None = ctx.q("suggestions", ctx.filters, ctx.settings.top_n)
scheduler: str | None = ctx.q("scheduler_of", ctx.filters)
if table is None:
    st.info("No tuning suggestions yet: this warehouse has no suggestions table. Run `preemptlens suggest`.")
elif table.height == 0:
    st.info("No suggestions: `preemptlens suggest` has not run yet, or found nothing worth changing.")
else:
    st.caption(
        "The latest run of `preemptlens suggest` per cluster, in its order: advice on whether to preempt at all "
        "first, then the changes that cut lost GPU-hours and preemptions the most for their share. #1 is the "
        "Overview's first action. Each effect was measured by replaying the recorded workload under the changed "
        "setting, unless it says otherwise; the cluster filter applies."
    )
    for i, s in enumerate(table.iter_rows(named=True)):
        subject = f" — {md(s['subject'])}" if s["subject"] else ""
        with st.expander(f"{i + 1}. {md(s['title'])}{subject} ({md(s['cluster'])})", expanded=i < 3):
            # The setting and its values are words of any length: text, not st.metric, which cuts them off.
            values = ("" if s["current_value"] is None and s["proposed_value"] is None
                      else f": **{md(s['current_value'] or 'none')}** → **{md(s['proposed_value'] or 'none')}**")
            st.markdown(f"**Change:** {md(s['setting'])}{values}")
            saving, wait = s["saving_gpu_h"], s["high_wait_change_s"]
            victims = s["victims_per_week_change"]
            # Only a figure the change moves is shown large: one that is the same under either setting (a wait of
            # 0 s both ways, nothing saved) is no effect of it; the effect's words below say what was replayed.
            moved = [name for name, moves in (("saving", saving is not None and round(saving, 1) != 0),
                                              ("wait", wait is not None and round(wait) != 0),
                                              ("victims", victims is not None and round(victims, 1) != 0))
                     if moves]
            cols = dict(zip(moved, st.columns(len(moved)), strict=True)) if moved else {}
            if "saving" in cols:
                cols["saving"].metric("Lost progress saved", gpu_hours(saving),
                                      help="Lost GPU-hours the change saves over the window, by the replay (or the "
                                           "ledger, where the effect says so).")
            if "wait" in cols:
                # A leading "-" is what st.metric reads as a fall: shorter waits are good (inverse colours).
                cols["wait"].metric("Critical + high median wait",
                                    f"{duration(abs(wait))} {'longer' if wait > 0 else 'shorter'}",
                                    delta=change(wait, DURATION), delta_color="inverse", delta_description="replayed",
                                    help="Change of the median queue wait of critical and high jobs under the change.")
            if "victims" in cols:
                more = f"{number(abs(victims))} {'more' if victims > 0 else 'fewer'}"
                cols["victims"].metric("Victims per week", more, delta=change(victims), delta_color="inverse",
                                       delta_description="replayed")
            st.markdown(f"**Evidence:** {md(s['evidence'])}")
            st.markdown(f"**Expected effect:** {md(s['effect'])}")
            st.caption(f"Window {window(s['window_start'], s['window_end'])}.")
            if not s["replay_reproduces"]:
                st.warning("The replay did not reproduce this window within tolerance: read the effect as rough.")
            snippets = json.loads(s["snippets"]) if s["snippets"] else {}
            # The cluster's own scheduler first.
            order = sorted(snippets, key=lambda name: name != scheduler)
            if order:
                tabs = st.tabs(order)
                for tab, name in zip(tabs, order, strict=True):
                    tab.code(str(snippets[name]))
