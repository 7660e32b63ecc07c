"""My preemptions: the logged-in reader's own jobs first, then their team's, one card per job with every
preemption of it: why each happened, what it cost (work thrown away and waiting, kept apart), when the job
ran again, and what would have protected it. The reader's own totals are apart from the team's. The page is
at /mine (victim notices link to /mine?cluster=C&job=J, which opens on that job). The figures are defined
once, in dashboards.data.mine and mine_totals."""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from preemptlens.analytics.actions import hold_text
from preemptlens.analytics.requeue import has_passed, restart_text
from preemptlens.dashboards.views_common import context, md, window_caption
from preemptlens.reading.masking import HIDDEN, WHY_HIDDEN, is_hidden
from preemptlens.reading.words import duration, gpu_hours, gpus, number, pct, plural, when

# Jobs per page: each is a card with its preemptions.
JOBS_PER_PAGE = 20


def why(p: dict[str, Any]) -> str:
    preemptor = p["preemptor_job_id"]
    if preemptor is None:
        by = "an unknown job (the scheduler did not name the preemptor)"
    else:
        by = (f"**{md(preemptor)}** (team {md(p['preemptor_team'] or 'unknown')}, "
              f"tier {md(p['preemptor_tier'] or 'unknown')}")
        by += f", {gpus(p['preemptor_gpus'])})"
    rule = (f"a {md(p['preemptor_tier'])} job may preempt a {md(p['victim_tier'])} one" if p["preemptor_tier"]
            else f"its tier, {md(p['victim_tier'])}, is preemptible")
    return (f"**Why:** preempted by {by} in {md(p['pool'] or 'an unknown pool')}; rule: {rule}; "
            f"reason the scheduler gave: {md(p['reason'] or 'none recorded')}.")


def cost(p: dict[str, Any]) -> str:
    warm = ("warm-up not measured (counted as none)" if p["warmup_gpu_hours"] is None
            else f"warm-up {gpu_hours(p['warmup_gpu_hours'])}")
    thrown = (f"**Work thrown away:** {gpu_hours(p['thrown_away_gpu_hours'])} = lost progress "
              f"{gpu_hours(p['lost_gpu_hours'])} ({gpus(p['victim_gpus'])} × {duration(p['lost_s'])}) + {warm}.")
    waited = (f"**Waiting:** {gpu_hours(p['waiting_gpu_hours'])} = {gpus(p['victim_gpus'])} × "
              f"{duration(p['requeue_delay_s'])} until it ran again"
              + (" (still waiting at the end of the data)." if p["requeue_censored"] else "."))
    return thrown + "  \n" + waited


def again(p: dict[str, Any]) -> str:
    if not p["requeue_censored"]:
        return f"**Ran again** as run {p['restart_run']} at {when(p['restart_time'])}."
    waited = p["requeue_delay_s"]
    expected = restart_text(p, p["victim_tier"], p["pool"], waited, duration)
    if p["expected_requeue_s"] is not None and not has_passed(p, waited):
        return (f"**Not restarted** by the end of the data; expected around {when(p['expected_restart_time'])}: "
                f"{md(expected)}.")
    # the expected time has passed (or too few restarted to know it): the text says how long it has waited
    return f"**Not restarted** by the end of the data; {md(expected)}."


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
    elif p["near_completion"] and p["basis"] == "assumed":
        # Without a checkpoint nothing of the run was kept: the share is how far it had run, not work saved.
        near = (f"it had run {pct(share)} of the work it needed when preempted, none of it kept (no checkpoint): "
                f"near-completion protection (at {pct(limit)}) would have let it finish")
    elif p["near_completion"]:
        near = f"{pct(share)} done: near-completion protection (at {pct(limit)}) would have spared it"
    else:
        near = f"{pct(share)} done, below the near-completion line of {pct(limit)}"
    return f"**What would have protected it:** {ckpt}; {near}."


def flags(p: dict[str, Any]) -> list[str]:
    found = []
    if p["avoidable"]:
        found.append(f"avoidable: {p['idle_gpus_in_pool']} idle hoarded GPUs were in the pool")
    elif p["avoidable"] is None:
        found.append("avoidable: unknown (no GPU samples)")
    if p["repeat_victim"]:
        found.append(f"repeat victim ({plural(p['prior_job_preemptions'], 'earlier preemption')})")
    if p["early_victim"]:
        found.append("early victim")
    if p["near_completion"]:
        found.append("near completion")
    return found


def story(p: dict[str, Any]) -> str:
    """Everything about one preemption."""
    held = hold_text(p, p["time"])
    parts = [f"**Run {p['victim_run']} preempted at {when(p['time'])}**", why(p), cost(p), again(p), protection(p)]
    if held:
        parts.append(f"**Actions:** {md(held)}.")
    if found := flags(p):
        parts.append("**Flags:** " + "; ".join(found) + ".")
    return "\n\n".join(parts)


def line(p: dict[str, Any]) -> str:
    """One earlier preemption in a line."""
    by = md(p["preemptor_job_id"] or "an unknown job")
    text = (f"{when(p['time'])}, run {p['victim_run']}: by {by} ({md(p['preemptor_tier'] or 'tier unknown')}); "
            f"{gpu_hours(p['thrown_away_gpu_hours'])} thrown away, {gpu_hours(p['waiting_gpu_hours'])} waiting")
    return text + "".join(f"; {f}" for f in flags(p))


def job_card(rows: pl.DataFrame) -> None:
    """One job: who it is, its preemptions in the window summed, its latest told in full, the others in a line."""
    latest = rows.row(0, named=True)
    whose = ("yours" if latest["own"]
             else f"team {md(latest['victim_team'])}, {md(latest['victim_user'] or 'unknown user')}")
    name = latest["victim_name"] if latest["victim_name"] not in (None, latest["victim_job_id"]) else None
    thrown = float(rows["thrown_away_gpu_hours"].sum())
    avoidable = int(rows["avoidable"].sum())
    box = st.container(border=True)
    box.markdown(
        f"#### {md(name or latest['victim_job_id'])}\n"
        f"{'Job ' + md(latest['victim_job_id']) + ', ' if name else ''}{whose} · {md(latest['cluster'])}/"
        f"{md(latest['pool'] or 'unknown pool')} · tier {md(latest['victim_tier'])} · {gpus(latest['victim_gpus'])} · "
        f"**{plural(rows.height, 'preemption')}**: {gpu_hours(thrown)} thrown away, "
        f"{gpu_hours(float(rows['waiting_gpu_hours'].sum()))} waiting"
        + (f" · {avoidable} avoidable" if avoidable else "")
        + (" · repeat victim" if rows["repeat_victim"].any() else "")
    )
    box.markdown(story(latest))
    if rows.height > 1:
        with box.expander(f"The {plural(rows.height - 1, 'other preemption')}"):
            st.markdown("\n".join(f"- {line(p)}" for p in rows.tail(-1).iter_rows(named=True)))


def totals_row(label: str, t: dict[str, Any] | None) -> None:
    st.markdown(f"**{label}**")
    cols = st.columns(4)
    t = t or {"preemptions": 0, "jobs": 0, "thrown_away_gpu_hours": 0.0, "waiting_gpu_hours": 0.0,
              "warmup_unknown": 0, "avoidable": 0, "repeat_jobs": 0}
    cols[0].metric("Preemptions", f"{t['preemptions']:,}",
                   help=f"Of {plural(t['jobs'], 'job')}; {t['avoidable']:,} avoidable; "
                        f"{plural(t['repeat_jobs'], 'job')} preempted more than once.")
    cols[1].metric("Jobs preempted", f"{t['jobs']:,}")
    cols[2].metric("Work thrown away, GPU-h", number(t["thrown_away_gpu_hours"] or 0.0),
                   help="Lost progress plus warm-up, GPU-hours"
                        + (f"; {plural(t['warmup_unknown'], 'warm-up')} not measured, counted as none."
                           if t["warmup_unknown"] else "."))
    cols[3].metric("Waiting, GPU-h", number(t["waiting_gpu_hours"] or 0.0),
                   help="Victim GPUs times requeue delay, GPU-hours: a second currency, never added to the first.")


ctx = context()
me = ctx.reader
st.title("My preemptions")
asked = st.query_params.get("job")
job = (st.query_params.get("cluster") or "", asked) if asked else None
if me.user is None and not asked:
    st.info("No login is configured, so the dashboard cannot tell which jobs are yours. The Preemptions page "
            "lists every preemption; a victim notice's link opens its job here.")
    st.stop()
# Exactly the cluster users the login maps to (dashboards.access.cluster_users: claims and email domains).
users, teams = me.cluster_users, me.teams
if me.user is None or me.admin:
    # An admin, and the open dashboard on this host, may open any job a notice names.
    teams = (*teams, *ctx.options.teams) if job else teams
teams_text = ", ".join(me.teams) or "no team"
scope = (f"job {asked} in {job[0] or 'any cluster'}, at any time" if job
         else window_caption(ctx.filters) + " · your own jobs first, then your team's")
st.caption((f"{md(me.user)} ({md(teams_text)}) · " if me.user else "") + md(scope))
if job and st.button("Show all my preemptions", key="all_mine"):
    st.query_params.clear()
    st.rerun()

totals = ctx.q("mine_totals", ctx.filters, users, teams, job)
if not job:
    totals_row("Your jobs", totals.get(True))
    if me.teams:
        totals_row(f"Your team's other jobs ({teams_text})", totals.get(False))
count = sum(t["jobs"] for t in totals.values())
if count == 0:
    st.info(f"No preemptions of job {md(asked)} that you may see." if job
            else "No preemptions of your jobs or your team's in this window.")
    st.stop()
offset = 0
if count > JOBS_PER_PAGE:
    pages = -(-count // JOBS_PER_PAGE)
    page = int(st.number_input(f"Page (of {pages:,}, {JOBS_PER_PAGE} jobs each)", min_value=1, max_value=pages,
                               value=1, key="mine_page"))
    offset = (page - 1) * JOBS_PER_PAGE
    st.caption(f"Jobs {offset + 1:,} to {min(offset + JOBS_PER_PAGE, count):,} of {count:,}: yours first, "
               "then your team's, each by its latest preemption.")
rows: pl.DataFrame = ctx.q("mine", ctx.filters, users, teams, JOBS_PER_PAGE, offset, job)
if rows.select(is_hidden("preemptor_job_id").any()).item():
    # A page that hides something says what and why.
    st.caption(f"A preemptor of another team reads “{HIDDEN[:-1]} #n)”: {WHY_HIDDEN}.")
for _, group in rows.group_by(["cluster", "victim_job_id"], maintain_order=True):
    job_card(group)
