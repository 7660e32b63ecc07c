"""The weekly report: one self-contained HTML file that reads in a mail client, and a Markdown summary for chat.

Both cover one ISO week: the answer first (the verdict, the counterfactual
headline, the net in both currencies and the one action to take, as on the
dashboard's Overview), then net benefit per team, the worst preemptions, the
top hoarders, scope creep, the top tuning suggestions and, while a declared
pilot runs, its evaluation, from the same queries (dashboards.data,
analytics.pilot), words (dashboards.answer, preemptlens.reading.words) and figures
(dashboards.figures) as the dashboard. The HTML needs no JavaScript: its
charts are PNG images inside it, drawn from the dashboard's figures by matplotlib
(dashboards/images.py: no browser needed); a chart that cannot be drawn is left
out and the report says which and why, its tables still holding every figure. A week with
no data in the warehouse says so, instead of a verdict over zeros.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from preemptlens import escape
from preemptlens.analytics.pilot import Evaluation, Pilot, PilotSettings, evaluate
from preemptlens.analytics.whatif.scorecard import question_text
from preemptlens.analytics.whatif.snippets import KAI, KUBERNETES, KUEUE, SLURM, VOLCANO
from preemptlens.config import section, setting
from preemptlens.dashboards import answer, coverage, data
from preemptlens.errors import PreemptlensError
from preemptlens.private import others_can_change, private_folder, remove_own_temps, replace_privately
from preemptlens.reading.words import (
    band_label,
    change,
    duration,
    gpu_hours,
    gpus,
    measure_text,
    money,
    number,
    pct,
    plural,
    window,
)

# The rendering stack (jinja2, plotly and the figures) is imported where a report is rendered:
# load_config imports this module for every command.
if TYPE_CHECKING:
    import jinja2
    import plotly.graph_objects as go
    from markupsafe import Markup

SCHEDULERS = (SLURM, KUEUE, KAI, VOLCANO, KUBERNETES)
log = logging.getLogger(__name__)
# Width of the charts' images in CSS pixels (drawn at twice that, for sharp text on dense screens).
IMAGE_WIDTH = 960


@section("report", "The weekly report (`preemptlens report`, scheduled by `preemptlens serve`).")
@dataclass(frozen=True)
class ReportSettings:
    folder: str = setting("reports", "Folder the weekly report's HTML and Markdown files are written to.")
    top_n: int = setting(
        10, "How many preemptions, hoarders and suggestions each list of the report shows.",
        bounds=(1, 1000),
    )
    trend_weeks: int = setting(
        8, "Weeks of tier shares, ending with the report's week, in the scope-creep section.",
        bounds=(1, 520),
    )
    scheduler: str = setting(
        "",
        "Scheduler whose configuration snippet each suggestion shows (slurm, kueue, kai, volcano, kubernetes); "
        "empty takes it from the source of the jobs (slurm or kubernetes). The HTML report keeps every "
        "scheduler's snippet behind a disclosure.",
        choices=("", *SCHEDULERS),
    )


SETTINGS = ReportSettings

TEMPLATES = Path(__file__).resolve().parent / "templates"
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


class ReportError(PreemptlensError):
    """The report cannot be made as asked (a malformed week, an unwritable folder)."""


@dataclass(frozen=True)
class Week:
    year: int
    number: int

    @classmethod
    def parse(cls, text: str) -> Week:
        match = _WEEK.match(text.strip()) if text.isascii() else None
        if not match:
            shown = text if len(text) <= 40 else text[:40] + "..."
            raise ReportError(f"--week {shown!r} is not an ISO week", "write it like 2026-W48")
        year, number = int(match.group(1)), int(match.group(2))
        if not 1970 <= year <= 2199:
            raise ReportError(f"--week {text!r}: the year is out of range", "give a week from 1970 to 2199")
        try:
            date.fromisocalendar(year, number, 1)
        except ValueError:
            raise ReportError(
                f"--week {text!r}: {year} has no ISO week {number}", "weeks run from W01 to W52 or W53"
            ) from None
        return cls(year, number)

    @classmethod
    def last_complete(cls, now: datetime) -> Week:
        """The ISO week before the one `now` falls in."""
        return cls.of(now - timedelta(days=7))

    @classmethod
    def of(cls, moment: datetime) -> Week:
        """The ISO week (UTC) `moment` falls in."""
        year, number, _ = moment.astimezone(UTC).date().isocalendar()
        return cls(year, number)

    @property
    def label(self) -> str:
        return f"{self.year}-W{self.number:02d}"

    @property
    def start(self) -> datetime:
        monday = date.fromisocalendar(self.year, self.number, 1)
        return datetime(monday.year, monday.month, monday.day, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=7)


@dataclass
class WeeklyReport:
    week: Week
    generated_at: datetime
    clusters: tuple[str, ...]
    headline: dict[str, Any]
    net_daily: pl.DataFrame
    scorecard: pl.DataFrame
    evidence: pl.DataFrame
    # Does preemption pay here? Per cluster the verdict and the counterfactual headline (the first section).
    answers: list[answer.ClusterAnswer]
    worst: pl.DataFrame
    # The preemption hazard by run age per tier, over every recorded run (not the week's): what sets how often
    # a job should checkpoint.
    hazard: pl.DataFrame
    hoarding_teams: pl.DataFrame
    hoarding_jobs: pl.DataFrame
    idle_daily: pl.DataFrame
    team_net: pl.DataFrame
    tier_shares: pl.DataFrame
    team_shares: pl.DataFrame
    suggestions: pl.DataFrame | None
    # Loss coverage and goodput per team over the week (dashboards.coverage).
    coverage: pl.DataFrame
    goodput: pl.DataFrame
    scheduler: str | None = None
    # Job runs of the selected clusters that ran during the week, and the span of all their runs.
    runs_in_week: int = 1
    data_span: tuple[datetime | None, datetime | None] = (None, None)
    price: float = 0.0
    currency: str = "USD"
    # Pilots running during the week: their evaluation up to the week's end, or why there is none.
    pilots: tuple[tuple[Pilot, Evaluation | str], ...] = ()

    @property
    def net(self) -> dict[str, float]:
        return {c: float(self.net_daily[c].sum()) for c in ("gain_value", "cost_value", "net_value")}

    def high_shares(self) -> tuple[float | None, float | None]:
        """Critical + high share of GPU-hours in this week and the week before."""

        def share(start: datetime) -> float | None:
            rows = self.tier_shares.filter(pl.col("week") == start)
            total = float(rows["gpu_hours"].sum())
            high = float(rows.filter(pl.col("tier").is_in(["critical", "high"]))["gpu_hours"].sum())
            return high / total if total else None

        return share(self.week.start), share(self.week.start - timedelta(days=7))

    def team_changes(self) -> pl.DataFrame:
        """Per team: critical + high share of its GPU-hours this week, the week before, and the change."""
        this = self.team_shares.filter(pl.col("week") == self.week.start).select(
            "team", pl.col("high_gpu_hour_share").fill_null(0.0).alias("this_week")
        )
        before = self.team_shares.filter(pl.col("week") == self.week.start - timedelta(days=7)).select(
            "team", pl.col("high_gpu_hour_share").fill_null(0.0).alias("week_before")
        )
        joined = this.join(before, on="team", how="full", coalesce=True).fill_null(0.0)
        return joined.with_columns((pl.col("this_week") - pl.col("week_before")).alias("change")).sort(
            "change", descending=True
        )


def build(
    r: data.Reader,
    week: Week,
    *,
    top_n: int,
    trend_weeks: int,
    clusters: tuple[str, ...] = (),
    now: datetime | None = None,
    scheduler: str = "",
    pilots: tuple[Pilot, ...] = (),
    thresholds: PilotSettings | None = None,
    price: float = 0.0,
    currency: str = "USD",
) -> WeeklyReport:
    f = data.Filters(start=week.start, end=week.end, clusters=clusters)
    present = r.frame(_PRESENT_SQL, {"clusters": list(clusters), "start": week.start, "end": week.end}).row(0)
    trend = data.Filters(start=week.start - timedelta(days=7 * (trend_weeks - 1)), end=week.end, clusters=clusters)
    return WeeklyReport(
        week=week,
        generated_at=now or datetime.now(UTC),
        clusters=clusters,
        headline=data.headline(r, f),
        net_daily=data.net_benefit(r, f),
        scorecard=data.scorecard(r, f),
        evidence=data.evidence(r, f),
        answers=answer.read(r, f),
        worst=data.worst(r, f, top_n),
        hazard=data.hazard(r, f),
        hoarding_teams=data.top_holders(r, f, "team", top_n),
        hoarding_jobs=data.top_holders(r, f, "job", top_n),
        idle_daily=data.idle_daily(r, f),
        team_net=data.team_net(r, f),
        tier_shares=data.tier_shares(r, trend),
        team_shares=data.team_high_shares(r, trend),
        suggestions=data.suggestions(r, f, top_n),
        coverage=data.coverage(r, f),
        goodput=data.goodput(r, f),
        scheduler=scheduler or data.scheduler_of(r, f),
        pilots=_pilots(r, week, pilots, thresholds or PilotSettings(), clusters),
        runs_in_week=int(present[0]),
        data_span=(present[1], present[2]),
        price=price,
        currency=currency,
    )


# Runs that were running at some time in the week, and the span of all runs (of the selected clusters).
_PRESENT_SQL = """
SELECT
    count(*) FILTER (WHERE start_time < $end AND coalesce(end_time, start_time) >= $start) AS in_week,
    min(start_time) AS first, max(greatest(start_time, end_time)) AS last
FROM job_runs
WHERE start_time IS NOT NULL
    AND (len(CAST($clusters AS VARCHAR[])) = 0 OR list_contains(CAST($clusters AS VARCHAR[]), cluster))
"""


def _pilots(r: data.Reader, week: Week, pilots: tuple[Pilot, ...], th: PilotSettings,
            clusters: tuple[str, ...]) -> tuple[tuple[Pilot, Evaluation | str], ...]:
    found: list[tuple[Pilot, Evaluation | str]] = []
    for pilot in pilots:
        running = pilot.start < week.end and (pilot.end is None or pilot.end > week.start)
        if not running or (clusters and pilot.cluster not in clusters):
            continue
        try:
            found.append((pilot, evaluate(r.frame, pilot, th, now=week.end)))
        except PreemptlensError as exc:
            found.append((pilot, str(exc)))
    return tuple(found)


# -- rendering -----------------------------------------------------------------


# Where a preemption's lost progress comes from (the ledger's basis).
BASIS = {"checkpoint": "since its last checkpoint", "declared": "half its declared checkpoint interval",
         "assumed": "the whole run: no checkpoint known"}


def _when(value: datetime | None) -> str:
    return "unknown" if value is None else f"{value:%a %Y-%m-%d %H:%M}"


def _hazard_rows(report: WeeklyReport) -> list[dict[str, str]]:
    several = report.hazard["cluster"].n_unique() > 1
    return [
        {
            "tier": f"{b['cluster']}: {b['tier']}" if several else str(b["tier"]),
            "run age": band_label(b["age_from_s"], b["age_to_s"]),
            "preemptions": f"{b['preemptions']:,} in {b['exposure_h']:,.0f} run-hours",
            "per run-hour": f"{b['hazard_per_h']:.3g} ({b['hazard_low_per_h']:.3g} to {b['hazard_high_per_h']:.3g})",
        }
        for b in report.hazard.filter(pl.col("hazard_per_h").is_not_null()).iter_rows(named=True)
    ] if report.hazard.height and report.hazard["preemptions"].sum() else []


def _worst_rows(report: WeeklyReport) -> list[dict[str, str]]:
    return [
        {
            "victim": f"{p['victim_job_id']} (run {p['victim_run']}, {p['victim_team']}, {p['victim_tier']})",
            "preemptor": f"{p['preemptor_job_id'] or 'unknown'}"
            + (f" ({p['preemptor_team']}, {p['preemptor_tier']})" if p["preemptor_job_id"] else ""),
            "when (UTC)": _when(p["time"]),
            "pool": f"{p['cluster']}/{p['pool']}",
            "work thrown away": f"{gpu_hours(p['wasted_gpu_hours'])} (lost progress {gpu_hours(p['lost_gpu_hours'])}, "
            f"{BASIS.get(p['basis'], p['basis'])})",
            "waiting": f"{gpu_hours(p['waiting_gpu_hours'])} ({gpus(p['victim_gpus'])} × "
            + duration(p["requeue_delay_s"])
            + (", not restarted)" if p["requeue_censored"] else ")"),
            "avoidable": "unknown" if p["avoidable"] is None else "yes" if p["avoidable"] else "no",
        }
        for p in report.worst.iter_rows(named=True)
    ]


def _holder_rows(frame: pl.DataFrame, label: str) -> list[dict[str, str]]:
    return [
        {
            label: h["holder"],
            **({} if label == "team" else {"team": h["team"]}),
            "idle": gpu_hours(h["idle_gpu_hours"]),
            "longest stretch": duration(h["longest_stretch_hours"] * 3600),
            "runs": f"{h['runs']:,}",
        }
        for h in frame.iter_rows(named=True)
    ]


def _team_rows(report: WeeklyReport) -> list[dict[str, str]]:
    return [
        {
            "team": t["team"],
            "this week": pct(t["this_week"]),
            "week before": pct(t["week_before"]),
            "change": f"{t['change'] * 100:+.1f} points",
        }
        for t in report.team_changes().iter_rows(named=True)
    ]


def _team_net_rows(report: WeeklyReport) -> list[dict[str, str]]:
    """Gain, cost and net per team, with a row of totals (the dashboard's Overview table)."""
    teams = report.team_net
    if teams.height == 0:
        return []
    total = teams.select(pl.lit("total").alias("team"), pl.exclude("team").sum())
    rows = []
    for t in pl.concat([teams.with_columns(pl.col("team").fill_null("(no team)")), total],
                       how="vertical_relaxed").iter_rows(named=True):
        row = {
            "team": t["team"],
            "times preempted": f"{t['preemptions']:,}",
            "wait saved as preemptor": gpu_hours(t["gain_gpu_hours"]),
            "work thrown away": gpu_hours(t["wasted_gpu_hours"]),
            "waiting as victim": gpu_hours(t["waiting_gpu_hours"]),
            "weighted net": number(t["net_value"]),
        }
        if report.price:
            row[f"weighted net, {report.currency}"] = money(t["net_value"], report.price, report.currency) or ""
        rows.append(row)
    return rows


def _suggestion_items(report: WeeklyReport) -> list[dict[str, Any]]:
    """The suggestions as the dashboard's tuning page shows them: in order, numbered from 1, each with its
    setting now and proposed, expected effect, evidence, and the snippet for the cluster's own scheduler."""
    if report.suggestions is None:
        return []
    items = []
    for i, s in enumerate(report.suggestions.iter_rows(named=True), start=1):
        snippets: dict[str, str] = {k: str(v) for k, v in json.loads(s["snippets"]).items()} if s["snippets"] else {}
        own = report.scheduler if report.scheduler in snippets else None
        items.append(
            {
                "rank": i,
                "title": s["title"] + (f" — {s['subject']}" if s["subject"] else ""),
                "cluster": s["cluster"],
                "setting": s["setting"],
                # advice without a value to change (the readiness advice) shows no "none → none"
                "change": None
                if s["current_value"] is None and s["proposed_value"] is None
                else f"{s['current_value'] or 'none'} → {s['proposed_value'] or 'none'}",
                # nothing said of lost progress a change does not move (or no replay measured)
                "saving": f"saving {gpu_hours(s['saving_gpu_h'])} of lost progress"
                if s["saving_gpu_h"] and round(s["saving_gpu_h"], 1) else None,
                "effect": s["effect"],
                "evidence": s["evidence"],
                "rough": not s["replay_reproduces"],
                "scheduler": own,
                "snippet": snippets[own] if own else None,
                "snippets": [(k, v) for k, v in snippets.items() if k != own],
            }
        )
    return items


def _evidence_of(report: WeeklyReport, cluster: str, question: int) -> str:
    rows = report.evidence.filter((pl.col("cluster") == cluster) & (pl.col("question_no") == question)).to_dicts()
    needed = [measure_text(r) for r in rows if r["rule"] != "any"]
    either = [measure_text(r) for r in rows if r["rule"] == "any"]
    return "; ".join(needed + (["and one of: " + "; ".join(either)] if either else []))


def _scorecard_rows(report: WeeklyReport) -> list[dict[str, str]]:
    evidence = report.evidence.to_dicts()
    return [
        {
            "cluster": s["cluster"],
            "question": s["question"],
            "answer": question_text(s, evidence),
            "evidence": _evidence_of(report, s["cluster"], s["question_no"]),
        }
        for s in report.scorecard.iter_rows(named=True)
    ]


def _answers(report: WeeklyReport) -> list[dict[str, Any]]:
    """The first section: per cluster the verdict and the counterfactual headline (dashboards/answer.py)."""
    return [{**vars(a), "line": a.line, "markdown": answer.markdown(a)} for a in report.answers]


def _pilot_rows(report: WeeklyReport) -> list[dict[str, Any]]:
    rows = []
    for pilot, ev in report.pilots:
        row: dict[str, Any] = {
            "name": pilot.name,
            "what": pilot.what,
            "pools": f"{pilot.cluster}: {', '.join(pilot.pools)} against {', '.join(pilot.control)}",
            "since": f"{pilot.start:%Y-%m-%d %H:%M} UTC",
        }
        if isinstance(ev, str):
            rows.append({**row, "verdict": "unknown", "reasons": [ev], "figures": []})
            continue
        reasons = [f"warning: {w}" for w in ev.warnings] + list(ev.reasons)
        if ev.verdict == "keep piloting" and ev.more_weeks:
            reasons.append(f"about {ev.more_weeks:.1f} more week(s) of data would settle it")
        figures = [
            {
                "figure": f.label,
                "difference in differences": "unknown" if f.did is None else change(f.did, f.unit),
                "interval": "–" if f.low is None or f.high is None
                else f"{change(f.low, f.unit)} to {change(f.high, f.unit)}",
                "observations (pilot before/after, control before/after)": "/".join(f"{x:,}" for x in f.n)
                + f" {f.n_of}",
            }
            for f in ev.figures
            if f.role in ("gain", "cost", "balance")
        ]
        rows.append({**row, "verdict": ev.verdict, "reasons": reasons, "figures": figures})
    return rows


def _net_cards(report: WeeklyReport) -> dict[str, Any]:
    """The net in both currencies as the dashboard's Overview shows it under its answer (money too with a price
    per GPU-hour); the answer itself is `answers` (dashboards/answer.py)."""
    net = answer.Net.of(report.headline, report.net_daily)

    def card(label: str, gpu_h: float | None, sign: bool = False) -> dict[str, str | None]:
        text = "unknown" if gpu_h is None else (f"{gpu_h:+,.0f}" if sign else number(gpu_h, 0))
        return {"label": label, "value": text, "money": money(gpu_h, report.price, report.currency)}

    return {
        "cards": [
            card("Wait saved, GPU-h", net.gain), card("Victims' wait, GPU-h", net.waiting),
            card("Net wait saved, GPU-h", net.waiting_net, sign=True),
            card("Work thrown away, GPU-h", net.thrown_away),
            card("Weighted net, GPU-h", net.weighted, sign=True),
        ],
        "in_money": net.in_money(report.price, report.currency),
    }


def _context(report: WeeklyReport) -> dict[str, Any]:
    head = report.headline
    this_share, before_share = report.high_shares()
    first, last = report.data_span
    restarted = head["preemptions"] - head["not_restarted"]
    return {
        "week": report.week.label,
        "window": window(report.week.start, report.week.end),
        "generated": f"{report.generated_at:%Y-%m-%d %H:%M} UTC",
        "clusters": ", ".join(report.clusters) or "all clusters",
        "no_data": report.runs_in_week == 0,
        "data_span": "no runs at all" if first is None or last is None else
        f"runs from {first:%Y-%m-%d} to {last:%Y-%m-%d} ({Week.of(first).label} to {Week.of(last).label})",
        **_net_cards(report),
        "head": {
            "preemptions": f"{head['preemptions']:,}",
            "victim_jobs": f"{head['victim_jobs']:,}",
            "lost": number(head["lost_gpu_hours"]),
            "wasted": number(head["wasted_gpu_hours"]),
            "waiting": number(head["waiting_gpu_hours"]),
            "gain": number(head["gain_gpu_hours"]),
            "median_requeue": duration(head["median_requeue_s"]),
            "median_over": plural(restarted, "victim") + " that restarted",
            "not_restarted": plural(head["not_restarted"], "victim"),
            "not_restarted_n": head["not_restarted"],
            "avoidable": data.avoidable_text(head),
            "hoarded": data.unknown_or(head["hoarded_gpu_hours"], "{:,.0f}", data.NO_SAMPLES),
        },
        "team_net": _team_net_rows(report),
        "worst": _worst_rows(report),
        "hazard": _hazard_rows(report),
        "hoarding_teams": _holder_rows(report.hoarding_teams, "team"),
        "hoarding_jobs": _holder_rows(report.hoarding_jobs, "job"),
        "high_share": pct(this_share),
        "high_share_before": pct(before_share),
        "teams": _team_rows(report),
        "suggestions_missing": report.suggestions is None,
        "suggestions": _suggestion_items(report),
        "scorecard": _scorecard_rows(report),
        "answers": _answers(report),
        "pilots": _pilot_rows(report),
        **coverage.report_context(report.coverage, report.goodput),
    }


def _environment(markdown: bool = False) -> jinja2.Environment:
    """The templates' environment: HTML escaped by Jinja's autoescape; the Markdown summary (for chat) with every
    printed value escaped for Markdown (preemptlens.escape), so that a job or team name never becomes markup, a
    link or an image; a code span is written with the `code` filter."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_markdown_value if markdown else None,
    )
    environment.filters["code"] = lambda value: _Markdown(escape.markdown_code(value))
    environment.filters["escaped"] = _Markdown
    if not markdown:
        from markupsafe import Markup

        # Our sentences carry their commands and settings as Markdown code spans: in HTML, <code>.
        environment.filters["prose"] = lambda value: Markup(escape.html_prose(value))
    return environment


class _Markdown(str):
    """Markdown a template filter wrote; printed as it is."""


def _markdown_value(value: object) -> str:
    return value if isinstance(value, _Markdown) else escape.markdown(value)


def _render_images(figures: dict[str, go.Figure]) -> tuple[dict[str, bytes], list[str]]:
    """The figures as PNG (dashboards/images.py), and for each one that could not be drawn, which and why."""
    try:
        from preemptlens.dashboards import images
    except ImportError as exc:
        return {}, [f"all charts: their renderer is not installed ({exc.name}): pip install matplotlib"]
    drawn: dict[str, bytes] = {}
    missing: list[str] = []
    for name, fig in figures.items():
        try:
            drawn[name] = images.png(fig, IMAGE_WIDTH)
        except images.ChartError as exc:
            missing.append(f"{_plain_title(fig)}: {exc}")
    return drawn, missing


def _plain_title(fig: go.Figure) -> str:
    return html.unescape(str(fig.layout.title.text or "a chart"))


def _image(png: bytes, alt: str) -> Markup:
    from markupsafe import Markup, escape

    # A data: URI keeps the report one file; width and max-width size it in mail clients without CSS support.
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return Markup(f'<img src="{uri}" alt="{escape(alt)}" width="{IMAGE_WIDTH}" '
                  'style="max-width:100%;height:auto;display:block;margin:0.6rem 0">')


def render_html(report: WeeklyReport) -> str:
    from preemptlens.dashboards import figures

    week = report.week.label
    span = (report.week.start, report.week.end)
    charts: dict[str, Any] = {}
    missing: list[str] = []
    if report.runs_in_week:
        built = {
            "net_benefit": figures.net_benefit(report.net_daily, f"Net benefit per day, {week}", span),
            "worst": figures.preemption_timeline(report.worst, f"Worst preemptions of {week}"),
            "hazard": figures.preemption_hazard(report.hazard),
            "hoarders": figures.top_holders(report.hoarding_teams, f"Idle GPU-hours by team, {week}"),
            "idle_daily": figures.idle_daily(report.idle_daily, f"Idle GPU-hours per day, {week}", span),
            "tier_shares": figures.tier_shares(report.tier_shares, "Tier shares of GPU-hours per week"),
            "team_shares": figures.team_high_shares(report.team_shares),
        }
        images, missing = _render_images(built)
        for problem in missing:
            log.warning("weekly report %s: chart left out: %s", week, problem)
        charts = {name: _image(png, _plain_title(built[name])) for name, png in images.items()}
    return _environment().get_template("weekly.html.j2").render(
        **_context(report), charts=charts, charts_missing=missing)


def render_markdown(report: WeeklyReport) -> str:
    return _environment(markdown=True).get_template("weekly.md.j2").render(**_context(report))


def write(report: WeeklyReport, folder: Path) -> tuple[Path, Path]:
    """Write preemptlens-<week>.html and .md into `folder`; a re-run for the same week replaces them.

    The reports hold every team's figures: a folder another user can write (or swap) is refused, each file is
    written into a new private file (never through a name someone planted) renamed over the old one, and the
    temporary files of an interrupted run are removed first."""
    try:
        private_folder(folder)
    except OSError as exc:
        raise ReportError(
            f"cannot create report folder {folder}: {exc.strerror}", "set report.folder or --out"
        ) from None
    problem = others_can_change(folder)
    if problem:
        raise ReportError(f"report folder {folder}: {problem}, so another user could read or replace the reports",
                          "chmod 700 it, or set report.folder or --out to a folder only the service's user can write")
    # Another run may be writing a report there now (serve's and one by hand): only what it would have renamed
    # long ago is left over.
    remove_own_temps(folder, older_than_s=600)
    stem = f"preemptlens-{report.week.label}"
    written = []
    for suffix, text in ((".html", render_html(report)), (".md", render_markdown(report))):
        path = folder / f"{stem}{suffix}"
        try:
            replace_privately(path, text.encode("utf-8"))
        except OSError as exc:
            raise ReportError(f"cannot write {path}: {exc.strerror}", "set report.folder or --out") from None
        written.append(path)
    return written[0], written[1]
