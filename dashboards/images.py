"""The weekly report's charts as PNG images, drawn by matplotlib from the same plotly figures the dashboard shows
(dashboards/figures.py): no browser, no network, nothing but the wheels `pip install` brings.

plotly's own static export (kaleido) drives a Chrome or Chromium, which a server often lacks: the report came
out without its charts there. This draws the few kinds of trace the figures use (bars, vertical or horizontal,
stacked or relative; lines and markers, stacked areas, error bars; an annotation on an empty figure) with the
figure's title, axis titles, ticks, ranges and colours. What it does not know (a trace of another kind) it
refuses by name, so the report says which chart is missing and why instead of drawing a wrong one.
"""

from __future__ import annotations

import html
import io
import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.axes import Axes

# matplotlib draws at 72 points to the inch; plotly's sizes are CSS pixels (96 to the inch).
_PT_PER_PX = 0.75
_TAG = re.compile(r"<[^>]+>")


class ChartError(ValueError):
    """A figure holds what this renderer does not draw (named in the message)."""


def _plain(text: object) -> str:
    """Plotly text (escaped for its HTML subset, <br> for a new line) as plain text; `$` kept literal."""
    if text is None:
        return ""
    lines = re.split(r"<br\s*/?>", str(text))
    return "\n".join(html.unescape(_TAG.sub("", line)) for line in lines).replace("$", r"\$")


def _values(seq: Sequence[Any] | None) -> list[Any]:
    return [] if seq is None else list(seq)


def _is_time(values: list[Any]) -> bool:
    return any(isinstance(v, datetime | date) for v in values)


def _categories(values: list[Any], order: Sequence[Any] | None) -> list[Any]:
    seen = list(order or [])
    return seen + [v for v in dict.fromkeys(values) if v not in seen]


def png(fig: go.Figure, width_px: int, scale: float = 2.0) -> bytes:
    """`fig` as a PNG `width_px` CSS pixels wide (drawn at `scale` times that) and as high as its layout says."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    layout = fig.layout
    height_px = layout.height or 360
    out = Figure(figsize=(width_px / 96, height_px / 96), dpi=96 * scale, layout="constrained")
    ax = out.add_subplot()
    ax.set_title(_plain(layout.title.text), loc="left", fontsize=11)
    if not fig.data:
        ax.set_axis_off()
        for note in layout.annotations or ():
            ax.text(0.5, 0.5, _plain(note.text), ha="center", va="center", color="#7f8c8d", transform=ax.transAxes)
        return _save(out)
    category_x = _categories([], layout.xaxis.categoryarray) if layout.xaxis.categoryorder == "array" else None
    stacks: dict[tuple[str, bool], dict[Any, float]] = defaultdict(lambda: defaultdict(float))
    areas: list[tuple[list[Any], list[float], str, str]] = []
    for trace in fig.data:
        kind = trace.type
        if kind == "bar":
            _bar(ax, trace, layout.barmode, stacks)
        elif kind == "scatter" and trace.stackgroup:
            areas.append((_values(trace.x), [v or 0.0 for v in _values(trace.y)], _plain(trace.name),
                          trace.line.color))
        elif kind == "scatter":
            _scatter(ax, trace, category_x)
        else:
            raise ChartError(f"a {kind} trace, which the report's renderer does not draw")
    if areas:
        xs, ys = stacked(areas)
        ax.stackplot(xs, *ys, labels=[a[2] for a in areas], colors=[a[3] for a in areas], alpha=0.85)
    _axes(ax, layout, category_x)
    if layout.yaxis.tickformat == ".0%":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    if layout.xaxis.tickmode != "array" and (layout.xaxis.type == "date" or _is_time(_values(fig.data[0].x))):
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _day(v)))
    handles, labels = ax.get_legend_handles_labels()
    if len(labels) > 1:
        out.legend(handles, labels, loc="outside upper right", ncols=min(len(labels), 6), fontsize=8, frameon=False)
    return _save(out)


def stacked(areas: Sequence[tuple[list[Any], list[float], str, str]]) -> tuple[list[Any], list[list[float]]]:
    """Stacked areas on one x axis, the union of theirs, as plotly stacks them (`stackgaps` "infer zero"): an
    area without a point at an x (a tier with no GPU-hours that week) is 0 there."""
    xs = sorted({x for area in areas for x in area[0]})
    return xs, [[dict(zip(area[0], area[1], strict=True)).get(x, 0.0) for x in xs] for area in areas]


def _day(value: float) -> str:
    from matplotlib.dates import num2date

    return f"{num2date(value):%b %d}"


def _save(out: Any) -> bytes:
    buffer = io.BytesIO()
    out.savefig(buffer, format="png")
    return buffer.getvalue()


def _bar(ax: Axes, trace: Any, barmode: str | None, stacks: dict[tuple[str, bool], dict[Any, float]]) -> None:
    horizontal = trace.orientation == "h"
    where, size = (_values(trace.y), _values(trace.x)) if horizontal else (_values(trace.x), _values(trace.y))
    size = [v or 0.0 for v in size]
    if trace.base is not None:
        raise ChartError("a bar with a base (a span on a time axis), which the report's renderer does not draw")
    bottoms = []
    for w, s in zip(where, size, strict=True):
        # Relative bars stack positives up and negatives down; stacked bars add up whatever their sign.
        key = ("bars", s < 0 if barmode == "relative" else False)
        bottoms.append(stacks[key][w] if barmode in ("relative", "stack") else 0.0)
        if barmode in ("relative", "stack"):
            stacks[key][w] += s
    color = trace.marker.color
    label = _plain(trace.name) if trace.name else None
    if horizontal:
        ax.barh([_plain(w) for w in where], size, left=bottoms, color=color, label=label)
    else:
        # 0.8 of a category, or of a day on a date axis (figures._daily_axis: a day's bar, less a gap).
        ax.bar(where, size, bottom=bottoms, width=0.8, color=color, label=label)


def _scatter(ax: Axes, trace: Any, category_x: list[Any] | None) -> None:
    x, y = _values(trace.x), _values(trace.y)
    if not any(v is not None for v in x):
        return  # a legend-only trace (the timeline's marker sizes): the report's tables carry the figures
    if category_x is not None:
        x = [category_x.index(v) if v in category_x else len(category_x) for v in x]
    mode = trace.mode or "lines+markers"
    label = _plain(trace.name) if trace.name else None
    color = trace.marker.color if "markers" in mode and trace.marker.color is not None else trace.line.color
    if "lines" in mode:
        ax.plot(x, y, color=trace.line.color or color, linewidth=trace.line.width or 1.5,
                drawstyle="steps-post" if trace.line.shape == "hv" else "default",
                marker="o" if "markers" in mode else None, markersize=4, label=label)
        label = None
    if trace.error_y.array is not None:
        ax.errorbar(x, y, yerr=[_values(trace.error_y.arrayminus), _values(trace.error_y.array)], fmt="none",
                    ecolor=trace.line.color or color, elinewidth=1, capsize=2)
    if mode == "markers" or (mode.startswith("markers") and "lines" not in mode):
        sizes = trace.marker.size
        sizes = [sizes] * len(x) if sizes is None or isinstance(sizes, int | float) else list(sizes)
        ax.scatter(x, y, s=[((s or 6) * _PT_PER_PX) ** 2 for s in sizes], color=color,
                   alpha=trace.marker.opacity or 1.0, edgecolors="white", linewidths=0.5, label=label)


def _axes(ax: Axes, layout: Any, category_x: list[Any] | None) -> None:
    for axis, set_label, set_ticks, set_lim in (
        (layout.xaxis, ax.set_xlabel, ax.set_xticks, ax.set_xlim),
        (layout.yaxis, ax.set_ylabel, ax.set_yticks, ax.set_ylim),
    ):
        if axis.title.text:
            set_label(_plain(axis.title.text), fontsize=9)
        if axis.tickmode == "array" and axis.tickvals is not None:
            set_ticks(list(axis.tickvals), [_plain(t) for t in axis.ticktext or axis.tickvals])
        if axis.range is not None:
            set_lim(*axis.range)
    if category_x is not None:
        ax.set_xticks(range(len(category_x)), [_plain(c) for c in category_x])
    if layout.yaxis.autorange == "reversed":
        ax.invert_yaxis()
    ax.tick_params(labelsize=8)
    ax.grid(axis="y", color="#ecf0f1")
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
