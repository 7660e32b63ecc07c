"""The weekly report: one self-contained HTML file (plotly inlined, opens offline) and a Markdown summary for chat.

Both cover one ISO week: its net benefit, the worst preemptions, the top
hoarders, scope creep, the top tuning suggestions and, while a declared pilot
runs, its evaluation, from the same queries (dashboards.data, analytics.pilot)
and figures (dashboards.figures) as the dashboard.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from preemptlens.analytics.pilot import Evaluation, Pilot, PilotSettings, evaluate, signed_text
from preemptlens.analytics.scorecard import answer_text, evidence_text
from preemptlens.analytics.snippets import KAI, KUBERNETES, KUEUE, SLURM, VOLCANO
from preemptlens.config import section, setting
from preemptlens.dashboards import answer, data
from preemptlens.errors import PreemptlensError

# The rendering stack (jinja2, plotly and the figures) is imported where a report is rendered:
# load_config imports this module for every command.
if TYPE_CHECKING:
    import jinja2
    import plotly.graph_objects as go
    from markupsafe import Markup

SCHEDULERS = (SLURM, KUEUE, KAI, VOLCANO, KUBERNETES)


@section("report", "The weekly report (`preemptlens report`, scheduled by `preemptlens serve`).")
@dataclass(frozen=True)
class ReportSettings:
    folder: str = setting("reports", "Folder the weekly report's HTML and Markdown files are written to.")
    top_n: int = setting(10, "How many preemptions, hoarders and suggestions each list of the report shows.")
    trend_weeks: int = setting(8, "Weeks of tier shares, ending with the report's week, in the scope-creep section.")
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
        match = _WEEK.match(text.strip())
        if not match:
            raise ReportError(f"--week {text!r} is not an ISO week", "write it like 2026-W48")
        year, number = int(match.group(1)), int(match.group(2))
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
        year, number, _ = (now.astimezone(UTC).date() - timedelta(days=7)).isocalendar()
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
    hoarding_teams: pl.DataFrame
    hoarding_jobs: pl.DataFrame
    idle_daily: pl.DataFrame
    tier_shares: pl.DataFrame
    team_shares: pl.DataFrame
    suggestions: pl.DataFrame | None
    scheduler: str | None = None
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
) -> WeeklyReport:
    f = data.Filters(start=week.start, end=week.end, clusters=clusters)
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
        hoarding_teams=data.top_holders(r, f, "team", top_n),
        hoarding_jobs=data.top_holders(r, f, "job", top_n),
        idle_daily=data.idle_daily(r, f),
        tier_shares=data.tier_shares(r, trend),
        team_shares=data.team_high_shares(r, trend),
        suggestions=data.suggestions(r, f, top_n),
        scheduler=scheduler or data.scheduler_of(r, f),
        pilots=_pilots(r, week, pilots, thresholds or PilotSettings(), clusters),
    )


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


def _num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    hours = seconds / 3600
    return f"{seconds / 60:.0f} min" if hours < 1.5 else f"{hours:.1f} h"


def _when(value: datetime | None) -> str:
    return "–" if value is None else f"{value:%a %Y-%m-%d %H:%M}"


def _worst_rows(report: WeeklyReport) -> list[dict[str, str]]:
    return [
        {
            "victim": f"{p['victim_job_id']} (run {p['victim_run']}, {p['victim_team']}, {p['victim_tier']})",
            "preemptor": f"{p['preemptor_job_id'] or 'unknown'}"
            + (f" ({p['preemptor_team']}, {p['preemptor_tier']})" if p["preemptor_job_id"] else ""),
            "when": _when(p["time"]),
            "pool": f"{p['cluster']}/{p['pool']}",
            "thrown away GPU-h": f"{_num(p['wasted_gpu_hours'])} (lost {_num(p['lost_gpu_hours'])}, {p['basis']})",
            "waiting GPU-h": f"{_num(p['waiting_gpu_hours'])} ({p['victim_gpus']} GPUs x "
            + _duration(p["requeue_delay_s"])
            + (", not restarted)" if p["requeue_censored"] else ")"),
            "avoidable": "unknown" if p["avoidable"] is None else "yes" if p["avoidable"] else "no",
        }
        for p in report.worst.iter_rows(named=True)
    ]


def _holder_rows(frame: pl.DataFrame, label: str) -> list[dict[str, str]]:
    return [
        {
            label: h["holder"],
            "team": h["team"],
            "idle GPU-h": _num(h["idle_gpu_hours"]),
            "longest stretch": f"{_num(h['longest_stretch_hours'])} h",
            "runs": str(h["runs"]),
        }
        for h in frame.iter_rows(named=True)
    ]


def _team_rows(report: WeeklyReport) -> list[dict[str, str]]:
    return [
        {
            "team": t["team"],
            "this week": _pct(t["this_week"]),
            "week before": _pct(t["week_before"]),
            "change": f"{t['change'] * 100:+.1f} points",
        }
        for t in report.team_changes().iter_rows(named=True)
    ]


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
                # advice without a value to change (the readiness advice) shows no "– → –"
                "change": None
                if s["current_value"] is None and s["proposed_value"] is None
                else f"{s['current_value'] or '–'} → {s['proposed_value'] or '–'}",
                "saving": _num(s["saving_gpu_h"]),
                "effect": s["effect"],
                "evidence": s["evidence"],
                "rough": not s["replay_reproduces"],
                "scheduler": own,
                "snippet": snippets[own] if own else None,
                "snippets": list(snippets.items()),
            }
        )
    return items


def _scorecard_rows(report: WeeklyReport) -> list[dict[str, str]]:
    evidence = report.evidence.to_dicts()
    return [
        {
            "cluster": s["cluster"],
            "question": s["question"],
            "answer": answer_text(s["answer"], s["missing"], s["borderline"]),
            "evidence": evidence_text([e for e in evidence
                                       if e["cluster"] == s["cluster"] and e["question_no"] == s["question_no"]]),
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
                "difference in differences": signed_text(f.did, f.unit),
                "interval": "–" if f.low is None or f.high is None
                else f"{signed_text(f.low, f.unit)} to {signed_text(f.high, f.unit)}",
                "n (pilot b/a, control b/a)": "/".join(str(x) for x in f.n) + f" {f.n_of}",
            }
            for f in ev.figures
            if f.role in ("gain", "cost", "balance")
        ]
        rows.append({**row, "verdict": ev.verdict, "reasons": reasons, "figures": figures})
    return rows


def _context(report: WeeklyReport) -> dict[str, Any]:
    head = report.headline
    this_share, before_share = report.high_shares()
    return {
        "week": report.week.label,
        "first_day": f"{report.week.start:%Y-%m-%d}",
        "last_day": f"{report.week.end - timedelta(days=1):%Y-%m-%d}",
        "generated": f"{report.generated_at:%Y-%m-%d %H:%M} UTC",
        "clusters": ", ".join(report.clusters) or "all clusters",
        "head": {
            "preemptions": f"{head['preemptions']:,}",
            "victim_jobs": f"{head['victim_jobs']:,}",
            "lost": _num(head["lost_gpu_hours"]),
            "wasted": _num(head["wasted_gpu_hours"]),
            "waiting": _num(head["waiting_gpu_hours"]),
            "gain": _num(head["gain_gpu_hours"]),
            "median_requeue": _duration(head["median_requeue_s"]),
            "not_restarted": head["not_restarted"],
            "avoidable": data.avoidable_text(head),
            "hoarded": data.unknown_or(head["hoarded_gpu_hours"], "{:,.1f}", data.NO_SAMPLES),
        },
        "net": {k: _num(v) for k, v in report.net.items()},
        "net_positive": report.net["net_value"] >= 0,
        "worst": _worst_rows(report),
        "hoarding_teams": _holder_rows(report.hoarding_teams, "team"),
        "hoarding_jobs": _holder_rows(report.hoarding_jobs, "job"),
        "high_share": _pct(this_share),
        "high_share_before": _pct(before_share),
        "teams": _team_rows(report),
        "suggestions_missing": report.suggestions is None,
        "suggestions": _suggestion_items(report),
        "scorecard": _scorecard_rows(report),
        "answers": _answers(report),
        "pilots": _pilot_rows(report),
    }


def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _figure_html(fig: go.Figure, div_id: str) -> Markup:
    from markupsafe import Markup

    html = fig.to_html(
        full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False, "responsive": True}
    )
    return Markup(html)


def render_html(report: WeeklyReport) -> str:
    import plotly.offline
    from markupsafe import Markup

    from preemptlens.dashboards import figures

    week = report.week.label
    window = (report.week.start, report.week.end)
    charts = {
        "net_benefit": _figure_html(
            figures.net_benefit(report.net_daily, f"Net benefit per day, {week}", window), "fig-net-benefit"
        ),
        "worst": _figure_html(figures.preemption_timeline(report.worst, f"Worst preemptions of {week}"), "fig-worst"),
        "hoarders": _figure_html(
            figures.top_holders(report.hoarding_teams, f"Idle GPU-hours by team, {week}"), "fig-hoarders"
        ),
        "idle_daily": _figure_html(
            figures.idle_daily(report.idle_daily, f"Idle GPU-hours per day, {week}", window), "fig-idle-daily"
        ),
        "tier_shares": _figure_html(
            figures.tier_shares(report.tier_shares, "Tier shares of GPU-hours per week"), "fig-tier-shares"
        ),
        "team_shares": _figure_html(figures.team_high_shares(report.team_shares), "fig-team-shares"),
    }
    plotly_js = Markup(plotly.offline.get_plotlyjs())
    return _environment().get_template("weekly.html.j2").render(**_context(report), charts=charts, plotly_js=plotly_js)


def render_markdown(report: WeeklyReport) -> str:
    return _environment().get_template("weekly.md.j2").render(**_context(report))


def write(report: WeeklyReport, folder: Path) -> tuple[Path, Path]:
    """Write preemptlens-<week>.html and .md into `folder`; a re-run for the same week replaces them."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(
            f"cannot create report folder {folder}: {exc.strerror}", "set report.folder or --out"
        ) from None
    stem = f"preemptlens-{report.week.label}"
    written = []
    for suffix, text in ((".html", render_html(report)), (".md", render_markdown(report))):
        path = folder / f"{stem}{suffix}"
        temp = path.with_name(f".{path.name}.tmp")
        try:
            temp.write_text(text, encoding="utf-8")
            temp.replace(path)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise ReportError(f"cannot write {path}: {exc.strerror}", "set report.folder or --out") from None
        written.append(path)
    return written[0], written[1]
