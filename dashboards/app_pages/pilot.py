"""Pilot: did turning preemption on (or changing its rules) in some pools help, against pools that did not change?

The same evaluation as `preemptlens pilot NAME` (analytics.pilot) for the pilots declared in [pilot]; the
sidebar's filters do not apply (a pilot fixes its own cluster, pools and window).
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.analytics.pilot import (
    Evaluation,
    Pilot,
    PilotSettings,
    candidates,
    declared,
    evaluate,
    readiness,
)
from preemptlens.config import load_config
from preemptlens.dashboards.data import reader
from preemptlens.dashboards.views_common import context
from preemptlens.errors import PreemptlensError
from preemptlens.readonly import Limits


@st.cache_data(show_spinner=False, max_entries=32)
def _evaluation(warehouse: str, limits: Limits, version: float, pilot: Pilot, th: PilotSettings) -> Evaluation:
    del version  # only part of the cache key
    with reader(warehouse, limits) as r:
        return evaluate(r.frame, pilot, th)


@st.cache_data(show_spinner=False, max_entries=8)
def _candidates(warehouse: str, limits: Limits, version: float,
                clusters: tuple[str, ...]) -> tuple[pl.DataFrame, list[str]]:
    del version
    with reader(warehouse, limits) as r:
        return candidates(r.frame, clusters), readiness(r.frame, clusters)


ctx = context()
st.title("Pilot evaluation")
try:
    config = load_config()
    pilots = declared(config)
    th = config.of(PilotSettings)
except PreemptlensError as exc:
    st.error(str(exc))
    st.stop()

if not pilots:
    st.info("No pilot declared: add one under [pilot] pilots.NAME in the configuration (docs/configuration.md), "
            "or run `preemptlens pilot NAME --pools ... --control ... --start ... --what ...`.")
else:
    name = st.selectbox("Pilot", sorted(pilots), key="pilot")
    pilot = pilots[name]
    st.caption(
        f"{pilot.what} · cluster {pilot.cluster} · pilot pools {', '.join(pilot.pools)} · control pools "
        f"{', '.join(pilot.control)} · changed {pilot.start:%Y-%m-%d %H:%M} UTC"
        + ("" if pilot.end is None else f", ended {pilot.end:%Y-%m-%d %H:%M} UTC")
    )
    try:
        ev = _evaluation(ctx.warehouse, ctx.limits, ctx.version, pilot, th)
    except PreemptlensError as exc:
        st.error(str(exc))
        st.stop()
    more = (f" About {ev.more_weeks:.1f} more week(s) of data at the current rate would settle it."
            if ev.verdict == "keep piloting" and ev.more_weeks else "")
    # st.error stays for failures (a query that failed); a roll back is a finding.
    if ev.verdict == "widen":
        st.success(f"**Verdict: {ev.verdict}**.", icon=":material/open_in_full:")
    else:
        icon = ":material/undo:" if ev.verdict == "roll back" else ":material/hourglass_top:"
        st.warning(f"**Verdict: {ev.verdict}**.{more}", icon=icon)
    for warning in ev.warnings:
        st.warning(warning, icon=":material/warning:")
    for reason in ev.reasons:
        st.markdown(f"- {reason}")
    cols = st.columns(3)
    cols[0].metric("Days before the change", ev.days_before)
    cols[1].metric("Days after the change", ev.days_after)
    cols[2].metric("Confidence", f"{th.confidence:.0%}")
    st.dataframe(ev.table(), hide_index=True, key="pilot_figures")
    st.caption(
        "Each figure is a difference in differences: pilot pools after minus before, less control pools after "
        "minus before; its interval is a bootstrap over days (the same days for both groups) and pools. n counts "
        "the observations behind pilot before/after and control before/after. " + " · ".join(ev.notes)
    )

st.header("Candidate pools and tiers")
st.caption("Recoverable (checkpoint coverage), shared (two or more teams) and scarce: where a pilot fits first.")
try:
    found, ready = _candidates(ctx.warehouse, ctx.limits, ctx.version, ctx.filters.clusters)
except PreemptlensError as exc:
    st.error(str(exc))
    st.stop()
for line in ready:
    st.caption(line)
st.dataframe(found, hide_index=True, key="pilot_candidates")
