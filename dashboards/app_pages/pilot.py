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
from preemptlens.dashboards.views_common import context, md, show_table
from preemptlens.errors import PreemptlensError
from preemptlens.reading.masking import Scope
from preemptlens.reading.words import change, measure_label, pct, quantity
from preemptlens.readonly import Limits


def figures_table(ev: Evaluation) -> pl.DataFrame:
    return pl.DataFrame([
        {
            "figure": f.label,
            "pilot": f"{quantity(f.pilot_before, f.unit)} → {quantity(f.pilot_after, f.unit)}",
            "control": f"{quantity(f.control_before, f.unit)} → {quantity(f.control_after, f.unit)}",
            "did": change(f.did, f.unit) if f.did is not None else f"unknown ({f.missing})",
            "interval": "–" if f.low is None or f.high is None
            else f"{change(f.low, f.unit)} to {change(f.high, f.unit)}",
            "n": "/".join(f"{x:,}" for x in f.n) + f" {f.n_of}",
        }
        for f in ev.figures
    ], schema={k: pl.String for k in ("figure", "pilot", "control", "did", "interval", "n")})


@st.cache_data(show_spinner=False, max_entries=32)
def _evaluation(warehouse: str, limits: Limits, version: float, scope: Scope, pilot: Pilot,
                th: PilotSettings) -> Evaluation:
    del version  # only part of the cache key
    with reader(warehouse, limits, scope=scope) as r:
        return evaluate(r.frame, pilot, th)


@st.cache_data(show_spinner=False, max_entries=8)
def _candidates(warehouse: str, limits: Limits, version: float, scope: Scope,
                clusters: tuple[str, ...]) -> tuple[pl.DataFrame, list[str]]:
    del version
    with reader(warehouse, limits, scope=scope) as r:
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
        f"{md(pilot.what)} · cluster {md(pilot.cluster)} · pilot pools {md(', '.join(pilot.pools))} · control pools "
        f"{md(', '.join(pilot.control))} · changed {pilot.start:%Y-%m-%d %H:%M} UTC"
        + ("" if pilot.end is None else f", ended {pilot.end:%Y-%m-%d %H:%M} UTC")
    )
    try:
        ev = _evaluation(ctx.warehouse, ctx.limits, ctx.version, ctx.scope, pilot, th)
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
        st.markdown(f"- {md(reason)}")
    cols = st.columns(3)
    cols[0].metric("Days before the change", ev.days_before)
    cols[1].metric("Days after the change", ev.days_after)
    cols[2].metric("Confidence", pct(th.confidence))
    show_table(figures_table(ev), {
        "figure": ("Figure", "text"), "pilot": ("Pilot pools, before → after", "text"),
        "control": ("Control pools, before → after", "text"), "did": ("Difference in differences", "text"),
        "interval": (f"{pct(th.confidence)} interval", "text"),
        "n": ("Observations (pilot before/after, control before/after)", "text"),
    }, key="pilot_figures")
    st.caption(
        "Each figure is a difference in differences: pilot pools after minus before, less control pools after "
        "minus before; its interval is a bootstrap over days (the same days for both groups) and pools. n counts "
        "the observations behind pilot before/after and control before/after. " + md(" · ".join(ev.notes))
    )

st.header("Candidate pools and tiers")
st.caption(f"Recoverable ({measure_label('checkpoint_coverage')} enough), shared (two or more teams) and scarce "
           "(the cluster's GPUs, as the scorecard's first question reads them): where a pilot fits first.")
try:
    found, ready = _candidates(ctx.warehouse, ctx.limits, ctx.version, ctx.scope, ctx.filters.clusters)
except PreemptlensError as exc:
    st.error(str(exc))
    st.stop()
for line in ready:
    st.caption(md(line))
show_table(found, {
    "cluster": ("Cluster", "text"), "pool": ("Pool", "text"), "tier": ("Tier", "text"),
    "candidate": ("Candidate", "bool"), "recoverable": ("Recoverable", "bool"), "shared": ("Shared", "bool"),
    "scarcity": ("Scarcity", "text"), "preemptible_gpu_hours": ("Preemptible GPU-h", "gpu_h"),
    "checkpoint_coverage": ("Checkpointed share", "pct"), "teams": ("Teams", "int"),
    "largest_team_share": ("Largest team's share", "pct"),
}, key="pilot_candidates")
