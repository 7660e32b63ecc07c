"""Overview: the answer (verdict and counterfactual headline), headline counts, net benefit over time, and the
readiness scorecard with its evidence."""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.analytics.scorecard import answer_text, evidence_text, measure_text
from preemptlens.dashboards import answer, figures
from preemptlens.dashboards.data import NO_SAMPLES, avoidable_text, unknown_or
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

answer.show(answer.build(ctx.q("scorecard", f), ctx.q("counterfactual", f)))

head = ctx.q("headline", f)
cols = st.columns(4)
cols[0].metric("Preemptions", f"{head['preemptions']:,}", help="Runs ended by a preemption in the window.")
cols[1].metric("Victim jobs", f"{head['victim_jobs']:,}")
cols[2].metric("Median requeue delay", duration(head["median_requeue_s"]),
               help="Preemption to restart, over victims that restarted.")
cols[3].metric("Avoidable preemptions", avoidable_text(head),
               help="Enough GPUs sat idle in hoarding stretches in the pool to serve the preemptor instead "
                    "(unknown without GPU samples).")
cols = st.columns(4)
cols[0].metric("Work thrown away GPU-hours", f"{head['wasted_gpu_hours']:,.1f}",
               help="Compute paid for twice: work since each victim's last checkpoint plus its warm-up, "
                    "times its GPUs.")
cols[1].metric("Victim waiting GPU-hours", f"{head['waiting_gpu_hours']:,.1f}",
               help="Time-to-result, not wasted compute: victim GPUs x requeue delay.")
cols[2].metric("Preemptor wait saved GPU-hours", f"{head['gain_gpu_hours']:,.1f}",
               help="Time-to-result: preemptor GPUs x how much earlier they started than by waiting for GPUs "
                    "to free up.")
cols[3].metric("Hoarded GPU-hours", unknown_or(head["hoarded_gpu_hours"], "{:,.1f}", NO_SAMPLES),
               help="Allocated GPUs idle for at least the hoarding window.")
st.caption(
    f"Work thrown away = lost progress {head['lost_gpu_hours']:,.1f} GPU-h + warm-up "
    f"{head['wasted_gpu_hours'] - head['lost_gpu_hours']:,.1f} GPU-h; waiting is GPU-hours of a different kind "
    "(time-to-result), never added to it. "
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
evidence: pl.DataFrame = ctx.q("evidence", f)
if card.height == 0:
    st.info("No runs in the warehouse yet: nothing to score.")
for cluster in card["cluster"].unique(maintain_order=True).to_list():
    rows = card.filter(pl.col("cluster") == cluster)
    mine = evidence.filter(pl.col("cluster") == cluster)
    st.dataframe(
        pl.DataFrame(
            {
                "#": rows["question_no"],
                "question": rows["question"],
                "answer": [answer_text(r["answer"], r["missing"], r["borderline"]) for r in rows.iter_rows(named=True)],
                "evidence": [
                    evidence_text(mine.filter(pl.col("question_no") == q).to_dicts()) for q in rows["question_no"]
                ],
            }
        ),
        hide_index=True,
        key=f"scorecard_{cluster}",
    )
    also = mine.filter(pl.col("question_no") == 0).to_dicts()
    if also:
        st.caption("Also read by the verdict: " + "; ".join(measure_text(e) for e in also) + ".")
with st.expander("Evidence behind the scorecard"):
    st.dataframe(evidence, hide_index=True, key="evidence")
st.caption("The scorecard covers all the data of each cluster; only the cluster filter applies. Intervals are "
           "bootstrap intervals over days; a measure whose interval holds its threshold is borderline.")
charts.draw()
