"""Plotly figures shared by the dashboard and the weekly report.

Each builder takes a frame from dashboards.data and returns a figure; none
queries anything, so the report and the app draw the same numbers the same way.
Plotly reads a few HTML tags (<a href>, <b>, <br>) and %{...} templates in the
text it draws: every name from the data goes through `_text` first.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import plotly.graph_objects as go
import polars as pl

from preemptlens import escape
from preemptlens.dashboards.data import TIER_ORDER, VictimDetail
from preemptlens.reading.words import band_label, duration, gpus, iso_week, number

TIER_COLORS = {"critical": "#c0392b", "high": "#e67e22", "normal": "#2e86c1", "low": "#95a5a6"}
STATE_COLORS = {
    "completed": "#27ae60",
    "running": "#2e86c1",
    "preempted": "#c0392b",
    "requeued": "#c0392b",
    "failed": "#8e44ad",
    "cancelled": "#7f8c8d",
    "timeout": "#d35400",
    "node_fail": "#8e44ad",
    "pending": "#bdc3c7",
}
GAIN_COLOR = "#27ae60"
COST_COLOR = "#c0392b"


def _text(value: object) -> str:
    """A name from the data as plotly text: no tag, link or %{template} of its own."""
    return escape.html_text(value).replace("%{", "%&#123;")


def _layout(fig: go.Figure, title: str, y_title: str, height: int = 360) -> go.Figure:
    fig.update_layout(
        title={"text": _text(title), "x": 0, "xanchor": "left", "font": {"size": 15}},
        template="plotly_white",
        height=height,
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1},
        yaxis_title=y_title,
        hoverlabel={"align": "left"},
    )
    return fig


def _weekly_axis(fig: go.Figure, weeks: list[datetime]) -> None:
    """One tick per week of the data, at its Monday, labelled with its ISO week (2026-W48). Plotly's own weekly
    ticks fall on Sundays, which strftime's %V gives the week before."""
    weeks = sorted(set(weeks))
    fig.update_xaxes(tickmode="array", tickvals=weeks, ticktext=[iso_week(w) for w in weeks],
                     hoverformat="%Y-%m-%d", ticklabeloverflow="allow")


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(
        text=message, showarrow=False, font={"size": 14, "color": "#7f8c8d"}, x=0.5, y=0.5, xref="paper", yref="paper"
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, "", height=220)


DAY_MS = 86_400_000


def _signed_ticks(fig: go.Figure, values: list[float | None], axis: str = "y") -> None:
    """Ticks of an axis that goes below 0 written as every other number of the page (words.number: "-" for a
    minus, thousands separated): plotly writes its own with U+2212, and one screen would show two minus signs."""
    known = [float(v) for v in values if v is not None]
    low, high = min([0.0, *known]), max([0.0, *known])
    if low >= 0 or high == low:
        return
    raw = (high - low) / 6
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = [first + i * step for i in range(math.ceil((high - first) / step) + 1)]
    digits = max(0, -math.floor(math.log10(step)))
    text = [number(t, digits) for t in ticks]
    if axis == "y":
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=text)
    else:
        fig.update_xaxes(tickmode="array", tickvals=ticks, ticktext=text)


def _daily_axis(fig: go.Figure, window: tuple[datetime, datetime] | None) -> None:
    """Day bars a day wide (less a gap), over the whole window even when only some days have data."""
    fig.update_traces(width=0.8 * DAY_MS, offset=-0.4 * DAY_MS, selector={"type": "bar"})
    if window is not None:
        fig.update_xaxes(range=[window[0] - timedelta(hours=12), window[1] - timedelta(hours=12)])
    fig.update_xaxes(type="date", tickformat="%b %d", hoverformat="%Y-%m-%d")


def net_benefit(
    daily: pl.DataFrame,
    title: str = "Net benefit of preemption per day",
    window: tuple[datetime, datetime] | None = None,
) -> go.Figure:
    """Tier-weighted gains (up) against costs (down) per day, and the net."""
    if daily.height == 0:
        return _empty(title, "no preemptions in this window")
    days = daily["day"].to_list()
    fig = go.Figure()
    fig.add_bar(
        x=days,
        y=daily["gain_value"].to_list(),
        name="gain (preemptors)",
        marker_color=GAIN_COLOR,
        customdata=daily["gain_gpu_hours"].to_list(),
        hovertemplate="%{x|%Y-%m-%d}<br>gain %{y:.1f} weighted GPU-h<br>(%{customdata:.1f} GPU-h)<extra></extra>",
    )
    fig.add_bar(
        x=days,
        y=[-v for v in daily["cost_value"].to_list()],
        name="cost (victims)",
        marker_color=COST_COLOR,
        customdata=list(zip(daily["wasted_gpu_hours"].to_list(), daily["waiting_gpu_hours"].to_list(), strict=True)),
        hovertemplate="%{x|%Y-%m-%d}<br>cost %{y:.1f} weighted GPU-h<br>(%{customdata[0]:.1f} GPU-h of work thrown "
        "away, %{customdata[1]:.1f} GPU-h of waiting)<extra></extra>",
    )
    fig.add_scatter(
        x=days,
        y=daily["net_value"].to_list(),
        name="net",
        mode="lines+markers",
        line={"color": "#2c3e50", "width": 2},
        hovertemplate="%{x|%Y-%m-%d}<br>net %{y:.1f} weighted GPU-h<extra></extra>",
    )
    fig.update_layout(barmode="relative")
    _daily_axis(fig, window)
    _signed_ticks(fig, [*daily["gain_value"].to_list(), *(-v for v in daily["cost_value"].to_list()),
                        *daily["net_value"].to_list()])
    return _layout(fig, title, "tier-weighted GPU-hours")


def _sizes(values: list[float | None], largest: float) -> list[float]:
    """Marker diameters from 7 to 30 px, by area in proportion to the value."""
    return [7 + 23 * math.sqrt(max(v or 0.0, 0.0) / largest) if largest > 0 else 7.0 for v in values]


def _size_steps(largest: float) -> list[float]:
    """Up to three round values (1, 2 or 5 times a power of ten) for a size legend, the largest first."""
    if largest <= 0:
        return []
    steps: list[float] = []
    power = 10 ** math.floor(math.log10(largest))
    while len(steps) < 3 and power >= 0.1:
        for m in (5, 2, 1):
            if m * power <= largest and len(steps) < 3 and (not steps or m * power <= steps[-1] / 3):
                steps.append(m * power)
        power /= 10
    return steps


# More markers than this make the page slow to send and draw; the worst are the ones to see.
TIMELINE_MARKERS = 2000
# Up to this many preemptions are drawn one marker each; more are gathered per lane, victim tier and time bin.
TIMELINE_SINGLE = 150
# Bin widths to choose from, the narrowest that keeps a lane to about 60 bins.
_BINS_S = (3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400)
# Where each victim tier sits within its lane, so that tiers do not hide each other.
_TIER_OFFSET = {"critical": 0.3, "high": 0.1, "normal": -0.1, "low": -0.3}


def preemption_timeline(
    ledger: pl.DataFrame, title: str = "Preemptions over time", total: int | None = None
) -> go.Figure:
    """When, in which pool and of which victim tier the preemptions were, each marker's area growing with the work
    thrown away. Up to TIMELINE_SINGLE preemptions get one marker each; more are gathered per pool, tier and time
    bin (an hour to a week, by the span), one marker per bin saying how many it holds. `total` is how many
    preemptions there are when `ledger` holds only the worst of them (data.worst)."""
    if ledger.height == 0:
        return _empty(title, "no preemptions in this window")
    total = max(total or 0, ledger.height)
    if ledger.height > TIMELINE_MARKERS:
        ledger = ledger.sort(["wasted_gpu_hours", "waiting_gpu_hours"], descending=True, nulls_last=True).head(
            TIMELINE_MARKERS
        )
    if total > ledger.height:
        title = f"{title}: the {ledger.height:,} worst of {total:,}"
    ledger = ledger.with_columns(
        (pl.col("cluster") + "/" + pl.col("pool").fill_null("unknown pool")).alias("lane"),
        pl.col("wasted_gpu_hours").fill_null(0.0), pl.col("waiting_gpu_hours").fill_null(0.0),
    )
    lanes = sorted(ledger["lane"].unique().to_list())
    binned = ledger.height > TIMELINE_SINGLE
    if binned:
        times = ledger["time"].to_list()
        span = (max(times) - min(times)).total_seconds()
        width = next((b for b in _BINS_S if span / b <= 60), _BINS_S[-1])
        points = (
            ledger.with_columns(pl.col("time").dt.truncate(f"{width}s").alias("bin"))
            .sort("wasted_gpu_hours", descending=True)
            .group_by("lane", "victim_tier", "bin")
            .agg(
                pl.len().alias("n"), pl.col("wasted_gpu_hours").sum(), pl.col("waiting_gpu_hours").sum(),
                pl.col("victim_job_id").first().alias("worst"), pl.col("wasted_gpu_hours").first().alias("worst_h"),
            )
            .with_columns((pl.col("bin") + pl.duration(seconds=width // 2)).alias("time"))
        )
        title += f" ({duration(width)} bins)"
    else:
        points = ledger
    largest = float(points["wasted_gpu_hours"].max() or 0.0)  # type: ignore[arg-type]
    fig = go.Figure()
    for tier in TIER_ORDER:
        rows = points.filter(pl.col("victim_tier") == tier)
        if rows.height == 0:
            continue
        if binned:
            text = [
                f"{r['n']:,} preemption{'s' if r['n'] != 1 else ''} of {_text(tier)} victims in "
                f"{_text(r['lane'])}<br>"
                f"{r['wasted_gpu_hours']:,.1f} GPU-h thrown away, {r['waiting_gpu_hours']:,.1f} GPU-h waiting<br>"
                f"worst: {_text(r['worst'])} ({r['worst_h']:,.1f} GPU-h thrown away)"
                for r in rows.iter_rows(named=True)
            ]
        else:
            text = [
                f"victim {_text(r['victim_job_id'])} run {r['victim_run']} ({_text(r['victim_team'])}, "
                f"{gpus(r['victim_gpus'])})<br>"
                f"preemptor {_text(r['preemptor_job_id'] or 'unknown')} "
                f"({_text(r['preemptor_tier'] or 'tier unknown')})<br>"
                f"{r['wasted_gpu_hours']:,.1f} GPU-h thrown away, {r['waiting_gpu_hours']:,.1f} GPU-h waiting"
                for r in rows.iter_rows(named=True)
            ]
        fig.add_scatter(
            x=rows["time"].to_list(),
            y=[lanes.index(lane) + _TIER_OFFSET.get(tier, 0.0) for lane in rows["lane"].to_list()],
            mode="markers",
            name=f"victim {tier}",
            text=text,
            hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>%{text}<extra></extra>",
            marker={
                "size": _sizes(rows["wasted_gpu_hours"].to_list(), largest),
                "color": TIER_COLORS[tier],
                "opacity": 0.7,
                "line": {"width": 1, "color": "white"},
            },
        )
    for step in _size_steps(largest):
        # A legend of marker sizes: traces with no points, each drawn in the legend at its size.
        fig.add_scatter(x=[None], y=[None], mode="markers", legend="legend2", hoverinfo="skip",
                        name=f"{float(step):,g} GPU-h", marker={"size": _sizes([step], largest)[0], "color": "#aab7b8"})
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(lanes))),
                     ticktext=[_text(lane) for lane in lanes],
                     range=[-0.6, len(lanes) - 0.4], showgrid=False, zeroline=False)
    fig.update_xaxes(type="date")
    _layout(fig, title, "", height=230 + 70 * len(lanes))
    fig.update_layout(
        legend={"itemsizing": "constant"},
        legend2={"title": {"text": "work thrown away" + (" per bin" if binned else "")}, "itemsizing": "trace",
                 "orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},
    )
    return fig


def victim_runs(detail: VictimDetail, title: str) -> go.Figure:
    """Each run of one job as a bar from start to end, its checkpoints, and each preemption (its preemptor named
    to the right of the run it ended, in the right margin when it ends near the edge)."""
    runs = detail.runs.filter(pl.col("start_time").is_not_null())
    if runs.height == 0:
        return _empty(title, "this job has no run that started")
    fig = go.Figure()
    last_end: datetime | None = max(runs["end_time"].drop_nulls().to_list(), default=None)
    for state in runs["state"].unique(maintain_order=True).to_list():
        rows = runs.filter(pl.col("state") == state)
        starts = rows["start_time"].to_list()
        ends = [e if e is not None else last_end or s for s, e in zip(starts, rows["end_time"].to_list(), strict=True)]
        fig.add_bar(
            y=[f"run {r}" for r in rows["run"].to_list()],
            base=starts,
            x=[(e - s) / timedelta(milliseconds=1) for s, e in zip(starts, ends, strict=True)],
            orientation="h",
            name=_text(state),
            marker_color=STATE_COLORS.get(state, "#34495e"),
            customdata=[[f"{s:%Y-%m-%d %H:%M}", f"{e:%Y-%m-%d %H:%M}", duration((e - s).total_seconds())]
                        for s, e in zip(starts, ends, strict=True)],
            hovertemplate="%{y}: " + _text(state) + "<br>%{customdata[0]} to %{customdata[1]} UTC (%{customdata[2]})"
            "<extra></extra>",
        )
    ckpts = detail.checkpoints.filter((pl.col("kind") == "checkpoint") & pl.col("run").is_not_null())
    if ckpts.height:
        fig.add_scatter(
            x=ckpts["time"].to_list(),
            y=[f"run {r}" for r in ckpts["run"].to_list()],
            mode="markers",
            name="checkpoint",
            marker={"symbol": "diamond", "size": 9, "color": "#2c3e50"},
            hovertemplate="checkpoint %{x|%Y-%m-%d %H:%M} UTC<extra></extra>",
        )
    pre = detail.preemptions
    if pre.height:
        labels = [f" by {_text(p or 'unknown')}" for p in pre["preemptor_job_id"].to_list()]
        fig.add_scatter(
            x=pre["time"].to_list(),
            y=[f"run {r}" for r in pre["victim_run"].to_list()],
            mode="markers+text",
            name="preemption",
            text=labels,
            textposition="middle right",
            textfont={"size": 11, "color": "#5d6d7e"},
            cliponaxis=False,
            marker={"symbol": "x", "size": 12, "color": COST_COLOR},
            hovertemplate="preempted%{text} at %{x|%Y-%m-%d %H:%M} UTC<extra></extra>",
        )
    fig.update_xaxes(type="date")
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="overlay")
    _layout(fig, title, "", height=140 + 36 * runs.height)
    # Room on the right for the preemptor named beside a run that ends at the edge.
    fig.update_layout(margin={"r": 150})
    return fig


def idle_daily(
    daily: pl.DataFrame, title: str = "Idle GPU-hours per day", window: tuple[datetime, datetime] | None = None
) -> go.Figure:
    """Hoarded (allocated but idle) and unallocated (free) GPU-hours, kept apart."""
    if daily.height == 0:
        return _empty(title, "no capacity or runs in this window")
    days = daily["day"].to_list()
    fig = go.Figure()
    fig.add_bar(
        x=days,
        y=daily["hoarded_gpu_hours"].to_list(),
        name="hoarded (allocated, idle)",
        marker_color=COST_COLOR,
        hovertemplate="%{x|%Y-%m-%d}: %{y:.1f} GPU-h hoarded<extra></extra>",
    )
    fig.add_bar(
        x=days,
        y=daily["unallocated_gpu_hours"].to_list(),
        name="unallocated (free)",
        marker_color="#bdc3c7",
        hovertemplate="%{x|%Y-%m-%d}: %{y:.1f} GPU-h unallocated<extra></extra>",
    )
    fig.update_layout(barmode="stack")
    _daily_axis(fig, window)
    return _layout(fig, title, "GPU-hours")


def top_holders(holders: pl.DataFrame, title: str) -> go.Figure:
    """Idle GPU-hours held in hoarding stretches, largest first."""
    if holders.height == 0:
        return _empty(title, "no idle hoarding in this window")
    fig = go.Figure()
    fig.add_bar(
        x=holders["idle_gpu_hours"].to_list(),
        y=[_text(h) for h in holders["holder"].to_list()],
        orientation="h",
        marker_color=COST_COLOR,
        customdata=holders["longest_stretch_hours"].to_list(),
        hovertemplate="%{y}: %{x:.1f} idle GPU-h<br>longest stretch %{customdata:.1f} h<extra></extra>",
    )
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, "", height=120 + 28 * holders.height).update_xaxes(title="idle GPU-hours")


def tier_shares(shares: pl.DataFrame, title: str = "Tier shares of GPU-hours per week") -> go.Figure:
    if shares.height == 0:
        return _empty(title, "no runs in this window")
    fig = go.Figure()
    for tier in reversed(TIER_ORDER):
        rows = shares.filter(pl.col("tier") == tier)
        if rows.height:
            fig.add_scatter(
                x=rows["week"].to_list(),
                y=rows["gpu_hour_share"].to_list(),
                name=tier,
                stackgroup="tiers",
                mode="lines",
                line={"color": TIER_COLORS[tier], "width": 0.5},
                text=[iso_week(w) for w in rows["week"].to_list()],
                hovertemplate="%{text} (from %{x|%Y-%m-%d}): " + tier + " %{y:.0%}<extra></extra>",
            )
    fig.update_yaxes(tickformat=".0%", range=[0, 1])
    _weekly_axis(fig, shares["week"].to_list())
    # Room for the last week's label, centred on the right edge.
    return _layout(fig, title, "share of GPU-hours").update_layout(margin={"r": 40})


def team_high_shares(shares: pl.DataFrame, title: str = "Critical + high share per team") -> go.Figure:
    if shares.height == 0:
        return _empty(title, "no runs in this window")
    fig = go.Figure()
    for team in shares["team"].unique(maintain_order=True).to_list():
        rows = shares.filter(pl.col("team") == team)
        fig.add_scatter(
            x=rows["week"].to_list(),
            y=rows["high_gpu_hour_share"].fill_null(0.0).to_list(),
            name=_text(team),
            mode="lines+markers",
            text=[iso_week(w) for w in rows["week"].to_list()],
            hovertemplate="%{text} (from %{x|%Y-%m-%d}): " + _text(team) + " %{y:.0%}<extra></extra>",
        )
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    _weekly_axis(fig, shares["week"].to_list())
    return _layout(fig, title, "critical + high share of the team's GPU-hours")


def team_slopes(slopes: pl.DataFrame, title: str = "Weekly growth of each team's critical + high share") -> go.Figure:
    rows = slopes.filter(pl.col("high_share_slope").is_not_null())
    if rows.height == 0:
        return _empty(title, "fewer than two weeks of data")
    labels = [_text(f"{p}/{t}") for p, t in zip(rows["pool"], rows["team"], strict=True)]
    values = [v * 100 for v in rows["high_share_slope"].to_list()]
    fig = go.Figure()
    fig.add_bar(
        x=values,
        y=labels,
        orientation="h",
        marker_color=[COST_COLOR if v > 0 else "#2e86c1" for v in values],
        hovertemplate="%{y}: %{x:+.1f} points of the pool's GPU-hours per week<extra></extra>",
    )
    fig.update_yaxes(autorange="reversed")
    _signed_ticks(fig, values, axis="x")
    return _layout(fig, title, "", height=120 + 28 * rows.height).update_xaxes(title="percentage points per week")


def preemption_hazard(bands: pl.DataFrame, title: str = "Preemption risk by run age") -> go.Figure:
    """Preemptions per run-hour in each age band of a run (preemption_hazard), one line per victim tier (and
    cluster, when several are shown), with the view's 95% interval: how much more a young run is at risk."""
    shown = bands.filter(pl.col("hazard_per_h").is_not_null())
    if shown.height == 0 or shown["preemptions"].sum() == 0:
        return _empty(title, "no preemption of a run yet")
    fig = go.Figure()
    order = [band_label(a, b) for a, b in shown.select("age_from_s", "age_to_s").unique().sort("age_from_s").rows()]
    several = shown["cluster"].n_unique() > 1
    for (cluster, tier), rows in shown.sort("age_from_s").group_by("cluster", "tier", maintain_order=True):
        if tier not in TIER_COLORS or rows["preemptions"].sum() == 0:
            continue
        name = f"{cluster}: {tier}" if several else str(tier)
        h = rows["hazard_per_h"].to_list()
        fig.add_scatter(
            x=[band_label(a, b) for a, b in rows.select("age_from_s", "age_to_s").rows()], y=h, name=_text(name),
            mode="lines+markers", line={"color": TIER_COLORS[str(tier)], "shape": "hv"},
            error_y={"type": "data", "symmetric": False,
                     "array": [hi - x for hi, x in zip(rows["hazard_high_per_h"].to_list(), h, strict=True)],
                     "arrayminus": [x - lo for lo, x in zip(rows["hazard_low_per_h"].to_list(), h, strict=True)],
                     "thickness": 1},
            customdata=rows.select("preemptions", "exposure_h").rows(),
            hovertemplate=(f"{_text(name)}, runs aged %{{x}}: %{{y:.3g}} preemptions per run-hour "
                           "(%{customdata[0]:,} in %{customdata[1]:,.0f} run-hours)<extra></extra>"),
        )
    fig.update_xaxes(categoryorder="array", categoryarray=order, title_text="run age")
    return _layout(fig, title, "preemptions per run-hour")
