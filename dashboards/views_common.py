"""What every page shares: the warehouse, the filters, cached queries and number formats.

The entry script (dashboards/app.py) builds one `Context` per rerun from the
sidebar and stores it in the session; pages read it with `context()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl
import streamlit as st

from preemptlens.dashboards.access import Reader
from preemptlens.dashboards.data import QUERIES, DashboardSettings, Filters, Options, reader
from preemptlens.errors import PreemptlensError
from preemptlens.escape import markdown as md
from preemptlens.reading import words
from preemptlens.reading.masking import HIDDEN, WHY_HIDDEN, Scope, is_hidden
from preemptlens.readonly import Limits

# Every value from the data that a page writes into Markdown (st.markdown, captions, alerts, expander labels)
# goes through `md` (preemptlens.escape.markdown): a job or team name never becomes markup, a link or an image.
__all__ = ["md"]

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from streamlit.delta_generator import DeltaGenerator

CONTEXT_KEY = "preemptlens_context"
# True while Charts.draw builds a figure: a failed query is then shown in the chart's place.
_building_chart: ContextVar[bool] = ContextVar("preemptlens_building_chart", default=False)
# Set once a session has been sent charts: its browser tab has loaded plotly.js (see Charts).
CHARTS_SENT_KEY = "preemptlens_charts_sent"


@st.cache_data(show_spinner=False, max_entries=512)
def _cached(query: str, warehouse: str, limits: Limits, version: float, scope: Scope, args: tuple[Any, ...]) -> Any:
    del version  # only part of the cache key
    with reader(warehouse, limits, scope=scope) as r:
        return QUERIES[query](r, *args)


def cached(query: str, warehouse: str, limits: Limits, version: float, scope: Scope, *args: Any) -> Any:
    """`QUERIES[query](reader, *args)` as a reader of `scope` may see it (dashboards.data masks it), memoised
    per snapshot version (see data.snapshot_version) and scope: readers of one team share the results."""
    return _cached(query, warehouse, limits, version, scope, args)


@dataclass(frozen=True)
class Context:
    warehouse: str
    limits: Limits
    version: float
    filters: Filters
    options: Options
    settings: DashboardSettings
    reader: Reader

    @property
    def scope(self) -> Scope:
        return self.reader.scope

    def q(self, query: str, *args: Any) -> Any:
        """A query from dashboards.data as this reader may see it (dashboards.data masks it for their scope),
        memoised for this snapshot; a failure ends the page with its message (a chart's query, while
        `Charts.draw` builds it, leaves the message in the chart's place instead). The way a page reads."""
        try:
            return cached(query, self.warehouse, self.limits, self.version, self.scope, *args)
        except PreemptlensError as exc:
            if _building_chart.get():
                raise
            st.error(str(exc))
            st.stop()

    def q_or_error(self, query: str, *args: Any) -> Any:
        """Like `q`, but a failure is shown here, in the place of what would have shown it, and the rest of the
        page goes on: None then."""
        try:
            return cached(query, self.warehouse, self.limits, self.version, self.scope, *args)
        except PreemptlensError as exc:
            st.error(str(exc))
            return None


@dataclass
class Charts:
    """A page's plotly charts, each in its place on the page but sent to the browser after the rest.

    Streamlit's browser side loads the code of each kind of element (metric, table, chart) on its
    first use in a tab. Plotly's (4.7 MB) takes one to three seconds of the page's only JavaScript
    thread to evaluate, and a metric or table whose own code arrives while it runs is drawn only
    after it: seen in Chromium traces of a fresh tab, where the metrics of a page stayed skeletons
    until its charts had drawn. So the charts come last, and the first ones a session sends wait
    `dashboard.first_charts_wait_s` more, long enough for the browser to draw what came before.
    Later pages of the session find plotly loaded and send theirs at once."""

    _slots: list[tuple[DeltaGenerator, Callable[[], go.Figure], str]] = field(default_factory=list)

    def add(self, build: Callable[[], go.Figure], key: str) -> None:
        """Keep a place here for the chart `build()` returns, drawn by `draw`."""
        self._slots.append((st.empty(), build, key))

    def draw(self) -> None:
        began = time.monotonic()
        figures: list[tuple[DeltaGenerator, go.Figure | PreemptlensError, str]] = []
        token = _building_chart.set(True)
        try:
            for slot, build, key in self._slots:
                try:
                    figures.append((slot, build(), key))
                except PreemptlensError as exc:
                    figures.append((slot, exc, key))
        finally:
            _building_chart.reset(token)
        if figures and not st.session_state.get(CHARTS_SENT_KEY):
            # Building the figures counts towards the wait.
            time.sleep(max(0.0, context().settings.first_charts_wait_s - (time.monotonic() - began)))
            st.session_state[CHARTS_SENT_KEY] = True
        for slot, figure, key in figures:
            if isinstance(figure, PreemptlensError):
                slot.error(str(figure))
            else:
                slot.plotly_chart(figure, key=key)
        self._slots.clear()


def context() -> Context:
    ctx = st.session_state.get(CONTEXT_KEY)
    if not isinstance(ctx, Context):
        st.error("Open the dashboard through its entry page: `preemptlens dashboard`.")
        st.stop()
    return ctx


def window_caption(f: Filters) -> str:
    parts = [words.window(f.start, f.end)]
    for name, values in (("cluster", f.clusters), ("pool", f.pools), ("team", f.teams), ("tier", f.tiers)):
        if values:
            parts.append(f"{name}: {md(', '.join(values))}")
    return " · ".join(parts)


# Tables of up to this many columns fit the page at 1400 px (the walk in tests/dashboards/test_access_roles.py
# checks it); a wider one is a ledger that scrolls sideways.
WIDE_TABLE = 8


def show_table(frame: pl.DataFrame, columns: Mapping[str, tuple[str, str]], key: str, **kwargs: Any) -> None:
    """`frame`'s columns named in `columns` (column -> (label, kind)), in that order, each with its human label,
    unit and rounding: GPU-hours with one decimal, durations (seconds, or "hours") as durations, times in UTC,
    shares in percent.
    A column of `columns` the frame lacks is left out; one the frame has but `columns` does not name is not shown."""
    present = {c: spec for c, spec in columns.items() if c in frame.columns}
    shown = frame.select(list(present))
    config: dict[str, Any] = {}
    for column, (label, kind) in present.items():
        if kind in ("duration", "hours"):
            seconds = pl.col(column) * (3600 if kind == "hours" else 1)
            shown = shown.with_columns(seconds.map_elements(words.duration, return_dtype=pl.String).alias(column))
            config[column] = st.column_config.TextColumn(label)
        elif kind == "week":
            shown = shown.with_columns(pl.col(column).map_elements(words.iso_week, return_dtype=pl.String))
            config[column] = st.column_config.TextColumn(label)
        elif kind == "time":
            # Text, not a datetime column: the grid writes a missing time as "None"; here it is a dash (a run not
            # ended yet), and the ISO form still sorts in time order.
            utc = pl.col(column)
            if getattr(shown.schema[column], "time_zone", None):
                utc = utc.dt.convert_time_zone("UTC")
            shown = shown.with_columns(utc.dt.strftime("%Y-%m-%d %H:%M").fill_null("–"))
            config[column] = st.column_config.TextColumn(f"{label} (UTC)")
        elif kind == "pct":
            shown = shown.with_columns((pl.col(column) * 100).round(0))
            config[column] = st.column_config.NumberColumn(label, format="%.0f%%")
        elif kind in ("gpu_h", "number"):
            shown = shown.with_columns(pl.col(column).round(1 if kind == "gpu_h" else 2))
            config[column] = st.column_config.NumberColumn(label, format="localized")
        elif kind in ("int", "money"):
            shown = shown.with_columns(pl.col(column).round(0) if kind == "money" else pl.col(column))
            config[column] = st.column_config.NumberColumn(label, format="localized")
        elif kind == "bool":
            config[column] = st.column_config.CheckboxColumn(label)
        else:
            config[column] = st.column_config.TextColumn(label)
    if len(present) > WIDE_TABLE:
        # A ledger wider than the page scrolls sideways: its first column (what the row is) stays in view.
        first = next(iter(present))
        config[first] = {**config[first], "pinned": True}
    # A missing figure reads as the reading layer words it (the grid would draw "None").
    st.dataframe(shown, hide_index=True, key=key, column_config=config, placeholder=words.UNKNOWN, **kwargs)
    hidden = [label for c, (label, _) in present.items()
              if shown.schema[c] == pl.String and shown.select(is_hidden(c).any()).item()]
    if hidden:
        # A table that hides something says what and why.
        st.caption(f"“{HIDDEN[:-1]} #n)” in {', '.join(hidden)}: {WHY_HIDDEN}.")


def gpu_hours(value: float | None) -> str:
    return "–" if value is None else words.gpu_hours(value)


def when(value: datetime | None) -> str:
    return words.when(value)


def duration(seconds: float | None) -> str:
    return "–" if seconds is None else words.duration(seconds)
