"""Preemptions: the ledger, a timeline, and the story of one victim job."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl
import streamlit as st

from preemptlens.analytics.requeue import restart_text
from preemptlens.dashboards import figures
from preemptlens.dashboards.data import VictimDetail, avoidable_text
from preemptlens.dashboards.views_common import (
    Charts,
    context,
    duration,
    gpu_hours,
    md,
    show_table,
    when,
    window_caption,
)
from preemptlens.reading.masking import WHY_HIDDEN, is_hidden
from preemptlens.reading.words import gpus, number

LEDGER_VIEW = {
    "time": ("Preempted at", "time"), "cluster": ("Cluster", "text"), "pool": ("Pool", "text"),
    "victim_job_id": ("Victim job", "text"), "victim_run": ("Run", "int"), "victim_team": ("Victim team", "text"),
    "victim_tier": ("Victim tier", "text"), "victim_gpus": ("GPUs", "int"),
    "preemptor_job_id": ("Preemptor job", "text"), "preemptor_team": ("Preemptor team", "text"),
    "preemptor_tier": ("Preemptor tier", "text"), "reason": ("Reason given", "text"),
    "wasted_gpu_hours": ("Work thrown away, GPU-h", "gpu_h"), "lost_gpu_hours": ("Lost progress, GPU-h", "gpu_h"),
    "basis": ("Lost progress from", "text"), "warmup_s": ("Warm-up", "duration"),
    "waiting_gpu_hours": ("Waiting, GPU-h", "gpu_h"), "requeue_delay_s": ("Requeue delay", "duration"),
    "requeue_censored": ("Not restarted yet", "bool"), "gain_gpu_hours": ("Preemptor's wait saved, GPU-h", "gpu_h"),
    "avoidable": ("Avoidable", "bool"),
    "victim_live_cost_gpu_hours": ("Live cost at the preemption, GPU-h", "gpu_h"),
    "cheaper_victim_running": ("A cheaper victim was running", "bool"),
}
RUNS_VIEW = {
    "run": ("Run", "int"), "state": ("Ended as", "text"), "pool": ("Pool", "text"), "gpus": ("GPUs", "int"),
    "hosts": ("Hosts", "text"), "submit_time": ("Submitted", "time"), "eligible_time": ("Eligible", "time"),
    "start_time": ("Started", "time"), "end_time": ("Ended", "time"), "preemptor_job_id": ("Preempted by", "text"),
    "reason": ("Reason given", "text"),
}
CAUSES_VIEW = {
    "team": ("Team", "text"), "cause": ("How the run ended", "text"), "cause_by": ("Asked for by", "text"),
    "runs": ("Runs", "int"),
    "restarts": ("Ran again after", "int"), "run_gpu_h": ("GPU-hours of those runs", "gpu_h"),
    "silent_gpu_h": ("GPU-hours after the last progress report", "gpu_h"),
}
# How run_ends names a cause, as a reader says it.
CAUSES = {
    "preemption": "preempted", "node_failure": "node failure", "requeue": "requeued, not by a preemption",
    "cancel": "cancelled", "time_limit": "time limit", "crash": "crashed", "hang": "stopped making progress (hang)",
    "unknown": "unknown",
}
# Who asked for a cancel, a requeue or a hang's end (run_ends.cause_by); other ends are nobody's request.
ASKED = ("cancel", "requeue", "hang")
ASKED_BY = {"user": "the job's own user", "admin": "an admin (root, the scheduler or another user)"}
# Preemption stories shown for one victim, the latest; its runs table has them all.
STORIES = 10
BASIS = {
    "checkpoint": "from the job's own checkpoints",
    "rollback": "from its step reports alone, the goodput method",
    "declared": "from the checkpoint interval the job declared (half an interval lost on average)",
    "assumed": "no checkpoint known: the whole run is counted as lost",
}


def lost_story(p: dict[str, Any]) -> str:
    if p["basis"] == "checkpoint" and p["last_checkpoint_time"] is not None:
        since = f"since its last checkpoint at {when(p['last_checkpoint_time'])}"
    elif p["basis"] == "checkpoint":
        since = f"since the run started at {when(p['run_start'])}, with no checkpoint in this run"
    elif p["basis"] == "rollback":
        since = "since it first reached the step its restart resumed from"
    elif p["basis"] == "declared":
        since = "half its declared checkpoint interval"
    else:
        since = f"the whole run since {when(p['run_start'])}"
    source = f", measured from {p['progress_source']}" if p.get("progress_source") else ""
    return (
        f"**Lost progress:** {gpu_hours(p['lost_gpu_hours'])} = {gpus(p['victim_gpus'])} × {duration(p['lost_s'])}, "
        f"{since} ({md(p['basis'])}: {md(BASIS.get(p['basis'], p['basis']))}{md(source)})."
    )


def recovery_story(p: dict[str, Any]) -> str:
    if p["requeue_censored"]:
        expected = restart_text(p, p["victim_tier"], p["pool"], p["requeue_delay_s"], duration)
        requeue = (f"**Not restarted** by the end of the data, {duration(p['requeue_delay_s'])} after the preemption "
                   f"(the wait is still running); {md(expected)}.")
    else:
        requeue = (f"**Ran again** as run {p['restart_run']} at {when(p['restart_time'])}, "
                   f"{duration(p['requeue_delay_s'])} after the preemption "
                   f"({gpu_hours(p['requeue_gpu_hours'])} of waiting).")
    warm = "warm-up not measured" if p["warmup_s"] is None else f"warm-up {duration(p['warmup_s'])}"
    return f"{requeue} {warm.capitalize()}; recovery in all {duration(p['recovery_s'])}."


def live_cost_story(p: dict[str, Any]) -> str:
    """The victim's live cost when it was preempted, and whether a cheaper victim was running then."""
    if p["victim_live_cost_gpu_hours"] is None:
        return f"**Live cost at the preemption:** unknown ({md(p['victim_cost_unknown'] or 'no live cost')})."
    story = (f"**Live cost at the preemption:** {gpu_hours(p['victim_live_cost_gpu_hours'])} "
             "(GPUs × progress at risk, expected warm-up and requeue wait; "
             f"computed {when(p['victim_cost_computed_at'])}). ")
    if p["cheaper_victim_running"] is None:
        return story + "Whether a cheaper victim was running: unknown (a job of its pool had an unknown cost)."
    if not p["cheaper_victim_running"]:
        return story + "No cheaper preemptible job of at least its GPUs was running in its pool."
    return story + (f"A cheaper victim was running: **{md(p['cheaper_job_id'])}** "
                    f"(team {md(p['cheaper_team'] or '–')}, "
                    f"{gpus(p['cheaper_gpus'])}, {gpu_hours(p['cheaper_live_cost_gpu_hours'])}).")


def show_victim(detail: VictimDetail, job_id: str, charts: Charts) -> None:
    if detail.job.height:
        job = detail.job.row(0, named=True)
        st.markdown(
            f"**{md(job_id)}** — team {md(job['team'] or '–')}, user {md(job['user_name'] or '–')}, "
            f"tier **{md(job['tier'])}** ({md(job['priority_class'] or 'no priority class')}), {gpus(job['gpus'])} "
            f"in {md(job['pool'] or '–')}, submitted {when(job['submit_time'])}, source {md(job['source'])}."
        )
    charts.add(lambda: figures.victim_runs(detail, f"Runs of {job_id}"), key="victim_runs")
    count = detail.preemptions.height
    if count > STORIES:
        st.caption(f"The {STORIES} latest of its {count} preemptions; the table below lists every run.")
    for p in detail.preemptions.tail(STORIES).iter_rows(named=True):
        preemptor = p["preemptor_job_id"] or "an unknown job"
        by = f"**{md(preemptor)}**"
        if p["preemptor_job_id"]:
            by += f" (team {md(p['preemptor_team'] or '–')}, tier {md(p['preemptor_tier'] or '–')}, "
            by += f"{gpus(p['preemptor_gpus'])})"
        story = [
            f"**Run {p['victim_run']} preempted at {when(p['time'])}** in {md(p['pool'])} by {by}, "
            f"after running {duration(p['time'].timestamp() - p['run_start'].timestamp())}. "
            f"Reason given: {md(p['reason'] or 'none recorded')}.",
            lost_story(p),
            recovery_story(p),
            live_cost_story(p),
        ]
        flags = [
            label for key, label in (
                ("avoidable", f"avoidable: {p['idle_gpus_in_pool']} idle hoarded GPUs were in the pool"),
                ("early_victim", "early victim"), ("near_completion", "near completion"),
                ("repeat_victim", f"repeat victim ({p['prior_job_preemptions']} earlier)"),
            ) if p[key]
        ]
        if p["avoidable"] is None:
            flags.append("avoidable: unknown (no GPU samples: hoarding unknown)")
        if flags:
            story.append("**Flags:** " + "; ".join(flags) + ".")
        # One element per preemption: the browser draws each markdown element on its own, and a
        # victim preempted fifty times made two hundred of them.
        st.container(border=True).markdown("\n\n".join(story))
    show_table(detail.runs, RUNS_VIEW, key="victim_run_table")


ctx = context()
f = ctx.filters
charts = Charts()
limit = ctx.settings.table_rows
st.title("Preemptions")
st.caption(window_caption(f) + " · team and tier match the victim or the preemptor")

head = ctx.q("headline", f)
count = int(head["preemptions"])
# The headline numbers first: they are on screen while the browser still loads the ledger's table.
cols = st.columns(5)
cols[0].metric("Preemptions", f"{count:,}")
cols[1].metric("Victim jobs", f"{head['victim_jobs']:,}")
cols[2].metric("Work thrown away, GPU-h", number(head["wasted_gpu_hours"]),
               help="Compute paid for twice: lost progress plus warm-up, in GPU-hours.")
cols[3].metric("Victims' wait, GPU-h", number(head["waiting_gpu_hours"]),
               help="Time-to-result, not wasted compute: victim GPUs x requeue delay.")
cols[4].metric("Avoidable preemptions", avoidable_text(head))
charts.add(
    lambda: figures.preemption_timeline(ctx.q("worst", f, figures.TIMELINE_MARKERS), total=count),
    key="timeline",
)
charts.add(lambda: figures.preemption_hazard(ctx.q("hazard", f)), key="hazard")
st.caption("Preemption risk by run age is over every recorded run of the clusters and tiers chosen, not only this "
           "window's: a young run is at more risk than an old one where the line falls, which sets how often a job "
           "should checkpoint (Tuning, checkpoint interval).")
st.subheader(f"Ledger ({count:,} preemption{'s' if count != 1 else ''})")
# The browser gets one page of the ledger at a time, newest first.
offset = 0
if count > limit:
    pages = -(-count // limit)
    page = int(st.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, value=1, key="ledger_page"))
    offset = (page - 1) * limit
    st.caption(
        f"Rows {offset + 1:,} to {min(offset + limit, count):,}, newest first; "
        "narrow the filters, or raise the rows per page (`dashboard.table_rows`)."
    )
show_table(ctx.q("ledger_page", f, limit, offset), LEDGER_VIEW, key="ledger")

st.header("Why was this job preempted?")
# A reader who may not see other teams' jobs is offered their own teams' victims, the only ones they may open
# (an empty team filter would select every team's).
none = "No victims in this window."
if ctx.scope.everything:
    victims: pl.DataFrame = ctx.q("top_victims", f, limit)
else:
    teams = tuple(t for t in ctx.scope.teams if not f.teams or t in f.teams)
    victims = ctx.q("top_victims", replace(f, teams=teams, victim_teams=True), limit) if teams else pl.DataFrame()
    if teams:
        st.caption(f"Stories of your team's victims only ({md(', '.join(teams))}): {WHY_HIDDEN}.")
        none = "No victims of your team in this window."
    else:
        none = f"A victim's story is told to its own team, and you are in no team: {WHY_HIDDEN}."
victims = victims.filter(~is_hidden("victim_job_id")) if victims.height else victims
if victims.height == 0:
    st.info(none)
else:
    labels = {
        f"{r['victim_job_id']} ({r['cluster']}) — {r['preemptions']}× preempted, "
        f"{gpu_hours(r['wasted_gpu_hours'])} thrown away, {gpu_hours(r['waiting_gpu_hours'])} waiting": (
            r["cluster"], r["victim_job_id"])
        for r in victims.iter_rows(named=True)
    }
    choice = st.selectbox("Victim job (most work thrown away first)", list(labels), key="victim")
    cluster, job_id = labels[choice]
    show_victim(ctx.q("victim_detail", cluster, job_id), job_id, charts)

st.header("How runs ended")
st.caption("Not every restart is a preemption: each run of the window that ended other than completed, by its "
           "cause; a hang is a run whose job had stopped reporting progress long before "
           "the end, whatever the scheduler then did.")
causes = ctx.q("restart_causes", f).with_columns(
    pl.when(pl.col("cause").is_in(ASKED))
    .then(pl.col("cause_by").replace_strict(ASKED_BY, default="not recorded"))
    .otherwise(pl.lit("")).alias("cause_by"),
    pl.col("cause").replace(CAUSES),
)
if causes.height == 0:
    st.info("No run ended other than completed in this window.")
else:
    show_table(causes, CAUSES_VIEW, key="restart_causes")
charts.draw()
