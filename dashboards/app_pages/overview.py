"""Overview: the answer first (verdict, counterfactual headline, the net in both currencies, the one action to
take), then the headline counts, net benefit over time and per team, and the readiness scorecard."""

from __future__ import annotations

import polars as pl
import streamlit as st

from preemptlens.analytics.whatif.scorecard import question_text, verdict_text
from preemptlens.dashboards import answer, coverage, figures
from preemptlens.dashboards.data import NO_SAMPLES, avoidable_text
from preemptlens.dashboards.views_common import Charts, cached, context, md, show_table, window_caption
from preemptlens.errors import PreemptlensError
from preemptlens.reading.words import (
    RECORDED_VS_REPLAYED,
    THROWN_AWAY,
    duration,
    measure_label,
    measure_text,
    money,
    number,
    plural,
)

ctx = context()
f = ctx.filters
price, currency = ctx.settings.gpu_hour_price, ctx.settings.currency
charts = Charts()
st.title("Preemption overview")
st.caption(window_caption(f))

head = ctx.q("headline", f)
# Without the net benefit (its query failed: the chart says why) the weighted net is unknown.
try:
    net_daily = cached("net_benefit", ctx.warehouse, ctx.limits, ctx.version, ctx.scope, f)
except PreemptlensError:
    net_daily = None
net = answer.Net.of(head, net_daily)
card: pl.DataFrame = ctx.q("scorecard", f)
# The verdict and the counterfactual headline (dashboards/answer.py: worded as the CLI and the report word them).
answer.show(answer.build(card, ctx.q("counterfactual", f)))
if card.height == 0:
    st.info("No runs in the warehouse yet: nothing to answer.")


def metric(column: st.delta_generator.DeltaGenerator, label: str, gpu_h: float | None, help: str,
           sign: bool = False) -> None:
    value = "unknown" if gpu_h is None else (f"{gpu_h:+,.0f}" if sign and abs(gpu_h) >= 100 else
                                             f"{gpu_h:+,.1f}" if sign else number(gpu_h))
    cash = money(gpu_h, price, currency)
    column.metric(label, value, delta=cash, delta_color="off", delta_arrow="off", help=help)


# The answer above is the replay against plain queueing, over all the data; these are the ledger's, in the window.
st.markdown("**Recorded in this window** (the preemption ledger: what each preemption cost its victim and "
            "saved its preemptor)")
st.caption(RECORDED_VS_REPLAYED)
cols = st.columns(5)
metric(cols[0], "Wait saved, GPU-h", net.gain,
       "The preemptors' gain, in waiting: preemptor GPUs × how much earlier they started than by waiting for "
       "GPUs to free up.")
metric(cols[1], "Victims' wait, GPU-h", net.waiting,
       "Waiting: victim GPUs × requeue delay (to the end of the data for victims not restarted yet).")
metric(cols[2], "Net wait saved, GPU-h", net.waiting_net,
       "Preemptors' wait saved minus victims' waiting: one currency, so they subtract.", sign=True)
metric(cols[3], f"{THROWN_AWAY.capitalize()}, GPU-h", net.thrown_away,
       "Compute paid for twice: progress since each victim's last checkpoint plus its warm-up, × its GPUs. "
       "A second currency, never added to waiting.")
metric(cols[4], "Weighted net, GPU-h", net.weighted,
       "Gains minus costs with both currencies added, each GPU-hour weighted by its tier "
       "(analytics.tier_weights): the net benefit chart below.", sign=True)

cols = st.columns(5)
cols[0].metric("Preemptions", f"{head['preemptions']:,}", help="Runs ended by a preemption in the window.")
cols[1].metric("Victim jobs", f"{head['victim_jobs']:,}")
cols[2].metric("Median requeue delay", "unknown" if head["median_requeue_s"] is None
               else duration(head["median_requeue_s"]),
               help="Preemption to restart, over victims that restarted"
                    + (f" ({plural(head['not_restarted'], 'victim')} not restarted yet left out)."
                       if head["not_restarted"] else "."))
cols[3].metric("Avoidable preemptions", avoidable_text(head),
               help="Enough GPUs sat idle in hoarding stretches in the pool to serve the preemptor instead "
                    "(unknown without GPU samples).")
cols[4].metric("Hoarded, GPU-h", "unknown" if head["hoarded_gpu_hours"] is None else number(head["hoarded_gpu_hours"]),
               help="Allocated GPUs idle for at least the hoarding window."
                    + (f" Unknown: {NO_SAMPLES}." if head["hoarded_gpu_hours"] is None else ""))
notes = [f"Work thrown away = lost progress {number(head['lost_gpu_hours'])} GPU-h + warm-up "
         f"{number(head['wasted_gpu_hours'] - head['lost_gpu_hours'])} GPU-h."]
if head["not_restarted"]:
    notes.append(f"{plural(head['not_restarted'], 'victim')} not restarted by the end of the data (their wait runs "
                 "to it).")
if head["preemptor_unknown"]:
    notes.append(f"{plural(head['preemptor_unknown'], 'preemption')} with no known preemptor.")
if not price:
    notes.append("Set a price per GPU-hour (`dashboard.gpu_hour_price`) to read these in money too.")
st.caption(" ".join(notes))

charts.add(lambda: figures.net_benefit(ctx.q("net_benefit", f), window=(f.start, f.end)), key="net_benefit")
st.caption(
    "Gains go to the preemptor's team, costs to the victim's, each weighted by its tier. "
    "The tier filter does not apply to this chart; the team filter selects whose gains and costs are shown."
)

st.header("Gain, cost and net per team")
teams: pl.DataFrame | None = ctx.q_or_error("team_net", f)
if teams is None:
    pass
elif teams.height == 0:
    st.info("No preemptions in this window.")
else:
    total = teams.select(pl.lit("Total").alias("team"), pl.exclude("team").sum())
    shown = pl.concat([teams.with_columns(pl.col("team").fill_null("(no team)")), total], how="vertical_relaxed")
    columns = {
        "team": ("Team", "text"),
        # Short labels: the table fits the page at 1400 px (the caption says what each side is).
        "preemptions": ("Preempted", "int"),
        "gain_gpu_hours": ("Wait saved, GPU-h", "gpu_h"),
        "wasted_gpu_hours": ("Thrown away, GPU-h", "gpu_h"),
        "waiting_gpu_hours": ("Victims' wait, GPU-h", "gpu_h"),
        "gain_value": ("Weighted gain", "gpu_h"),
        "cost_value": ("Weighted cost", "gpu_h"),
        "net_value": ("Weighted net", "gpu_h"),
    }
    if price:
        shown = shown.with_columns((pl.col("net_value") * price).alias("net_money"))
        columns["net_money"] = (f"Weighted net, {currency}", "money")
    show_table(shown, columns, key="team_net")
    unknown = int(teams["gains_unknown"].sum())
    st.caption(
        "A team's gain is the wait its preemptors saved; its costs are what its victims paid: their work thrown away "
        "(lost progress and warm-up) and their wait. Weighted figures add both "
        "currencies with each tier's weight; the last row sums the teams."
        + (f" {plural(unknown, 'preemption')} had no known preemptor run, so their gain is unknown (not 0)."
           if unknown else "")
    )

st.header("Readiness scorecard")
evidence: pl.DataFrame = ctx.q("evidence", f)


def evidence_of(cluster: str, question: int) -> str:
    """A question's measures in words: the ones it needs all of, then the ones it needs one of."""
    rows = evidence.filter((pl.col("cluster") == cluster) & (pl.col("question_no") == question)).to_dicts()
    needed = [measure_text(r) for r in rows if r["rule"] != "any"]
    either = [measure_text(r) for r in rows if r["rule"] == "any"]
    return "; ".join(needed + (["and one of: " + "; ".join(either)] if either else []))


read_evidence = evidence.to_dicts()
for cluster in card["cluster"].unique(maintain_order=True).to_list():
    rows = card.filter(pl.col("cluster") == cluster)
    # Words, not a table: each answer's evidence is a sentence that a table cell would cut off.
    first = rows.row(0, named=True)
    verdict = verdict_text({**first, "borderline": first["verdict_borderline"]})
    st.markdown(f"**{md(cluster)}:** {verdict}.\n\n" + "\n".join(
        f"{r['question_no']}. **{r['question']}** "
        f"{question_text(r, read_evidence)}: "
        f"{evidence_of(cluster, r['question_no'])}."
        for r in rows.iter_rows(named=True)
    ))
with st.expander("Every measure behind the scorecard"):
    show_table(
        evidence.with_columns(
            pl.struct(pl.all()).map_elements(lambda r: measure_text(r), return_dtype=pl.String).alias("reading"),
            pl.col("measure").map_elements(measure_label, return_dtype=pl.String),
            pl.col("rule").replace_strict({"all": "needed", "any": "one of"}, default="needed",
                                          return_dtype=pl.String),
            pl.col("question_no").cast(pl.String).replace("0", "verdict"),
        ),
        {"cluster": ("Cluster", "text"), "question_no": ("Question", "text"), "measure": ("Measure", "text"),
         "reading": ("Value and threshold", "text"), "rule": ("Counts as", "text"), "passes": ("Passes", "bool")},
        key="evidence",
    )
st.caption("The scorecard covers all the data of each cluster; only the cluster filter applies.")
coverage.overview_sections(ctx)
if ctx.reader.via == "open":
    st.info(
        "No login is configured, so this dashboard listens on this host only and shows everything to whoever "
        "opens it. To share it, put it behind a login (access.proxy_headers or access.oidc, docs/deploy.md).",
        icon=":material/lock_open:",
    )
charts.draw()
