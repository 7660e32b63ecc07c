"""My preemptions: the logged-in reader's own preemptions first, then their team's: why each happened,
what it cost them (work thrown away and waiting, kept apart), when the job ran again, and what would have
protected it. The figures are defined once, in dashboards.data.mine."""

from __future__ import annotations

from typing import Any

import streamlit as st

from preemptlens.analytics.actions import hold_text
from preemptlens.dashboards.views_common import context, duration, gpu_hours, md, when, window_caption


def why(p: dict[str, Any]) -> str:
    preemptor = p["preemptor_job_id"]
    if preemptor is None:
        by = "an unknown job (the scheduler did not name the preemptor)"
    else:
        by = (f"**{md(preemptor)}** (team {md(p['preemptor_team'] or 'unknown')}, "
              f"tier {md(p['preemptor_tier'] or 'unknown')}")
        by += f", {p['preemptor_gpus'] or '?'} GPUs)"
    rule = (f"a {md(p['preemptor_tier'])} job may preempt a {md(p['victim_tier'])} one" if p["preemptor_tier"]
            else f"its tier, {md(p['victim_tier'])}, is preemptible")
    return (f"**Why:** preempted by {by} in {md(p['pool'] or 'an unknown pool')}; rule: {rule}; "
            f"reason the scheduler gave: {md(p['reason'] or 'none recorded')}.")


def cost(p: dict[str, Any]) -> str:
    warm = ("warm-up not measured, so the total is unknown" if p["warmup_gpu_hours"] is None
            else f"warm-up {gpu_hours(p['warmup_gpu_hours'])}")
    thrown = (f"**Work thrown away:** {gpu_hours(p['thrown_away_gpu_hours'])} = lost progress "
              f"{gpu_hours(p['lost_gpu_hours'])} ({p['victim_gpus']} GPUs × {duration(p['lost_s'])}) + {warm}.")
    waited = (f"**Waiting:** {gpu_hours(p['waiting_gpu_hours'])} = {p['victim_gpus']} GPUs × "
              f"{duration(p['requeue_delay_s'])} until it ran again"
              + (" (still waiting at the end of the data)." if p["requeue_censored"] else "."))
    return thrown + "  \n" + waited


def again(p: dict[str, Any]) -> str:
    if not p["requeue_censored"]:
        return f"**Ran again** as run {p['restart_run']} at {when(p['restart_time'])}."
    if p["expected_restart_time"] is None:
        return ("**Not restarted** by the end of the data; expected restart unknown (no recently restarted victim "
                "of its pool and tier to go by).")
    return (f"**Not restarted** by the end of the data; expected around {when(p['expected_restart_time'])} "
            f"(the median recent requeue delay of its pool and tier, {duration(p['typical_requeue_s'])}).")


def protection(p: dict[str, Any]) -> str:
    interval = p["checkpoint_interval_s"]
    if p["basis"] == "assumed":
        ckpt = ("no checkpoint known, so the whole run was lost; checkpointing every hour would have kept the "
                f"loss under {gpu_hours(p['victim_gpus'])}" if interval is None
                else f"it declared checkpoints every {duration(interval)} but none was seen")
    elif interval is not None:
        ckpt = (f"checkpoints every {duration(interval)}; a shorter interval cuts the loss in proportion "
                f"(at most {gpu_hours(p['victim_gpus'] * interval / 3600)} per preemption)")
    else:
        ckpt = "checkpoints seen, no interval declared"
    share, limit = p["work_done_share"], p["near_completion_share"]
    if share is None:
        near = "work done unknown (the job declared no expected run time), so near-completion protection could not tell"
    elif p["near_completion"]:
        near = f"{share:.0%} done: near-completion protection (at {limit:.0%}) would have spared it"
    else:
        near = f"{share:.0%} done, below the near-completion line of {limit:.0%}"
    return f"**What would have protected it:** {ckpt}; {near}."


ctx = context()
me = ctx.reader
st.title("My preemptions")
teams = ", ".join(me.teams) or "no team"
st.caption(f"{md(me.user)} ({md(teams)}) · {window_caption(ctx.filters)} · your own jobs first, then your team's")
# Exactly the cluster users the login maps to (dashboards.access.cluster_users: claims and email domains).
rows = ctx.q("mine", ctx.filters, me.cluster_users, me.teams, ctx.settings.table_rows)
own = int(rows["own"].sum()) if rows.height else 0
cols = st.columns(4)
cols[0].metric("Your preemptions", f"{own:,}")
cols[1].metric("Your team's", f"{rows.height - own:,}")
thrown = rows["thrown_away_gpu_hours"]
cols[2].metric("Work thrown away", "unknown" if thrown.null_count() else gpu_hours(thrown.sum()),
               help="Lost progress plus warm-up, GPU-hours; unknown while any warm-up was not measured.")
cols[3].metric("Waiting", gpu_hours(rows["waiting_gpu_hours"].sum()),
               help="Victim GPUs times requeue delay, GPU-hours: a second currency, not added to the first.")
if rows.height == 0:
    st.info("No preemptions of your jobs or your team's in this window.")
for p in rows.head(50).iter_rows(named=True):
    whose = "yours" if p["own"] else f"team {md(p['victim_team'])}, {md(p['victim_user'] or 'unknown user')}"
    box = st.container(border=True)
    box.markdown(
        f"**{md(p['victim_name'] or p['victim_job_id'])}** ({md(p['victim_job_id'])}, run {p['victim_run']}, "
        f"{whose}) — preempted at {when(p['time'])}, {p['victim_gpus']} GPUs, tier {md(p['victim_tier'])}"
    )
    held = hold_text(p, p["time"])
    parts = (why(p), cost(p), again(p), protection(p)) + ((f"**Actions:** {md(held)}.",) if held else ())
    box.markdown("\n\n".join(parts))
if rows.height > 50:
    st.caption(f"The 50 latest of {rows.height:,}; the Preemptions page lists them all.")
