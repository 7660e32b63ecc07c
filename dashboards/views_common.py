"""What every page shares: the warehouse, the filters, cached queries and number formats.

The entry script (dashboards/app.py) builds one `Context` per rerun from the
sidebar and stores it in the session; pages read it with `context()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import streamlit as st

from preemptlens.dashboards.access import Reader
from preemptlens.dashboards.data import QUERIES, DashboardSettings, Filters, Options, Scope, reader
from preemptlens.errors import PreemptlensError
from preemptlens.escape import markdown as md
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
    parts = [f"{f.start:%Y-%m-%d} to {f.end:%Y-%m-%d} (UTC, end exclusive)"]
    for name, values in (("cluster", f.clusters), ("pool", f.pools), ("team", f.teams), ("tier", f.tiers)):
        if values:
            parts.append(f"{name}: {md(', '.join(values))}")
    return " · ".join(parts)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = float(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def when(value: datetime | None) -> str:
    return "–" if value is None else f"{value:%Y-%m-%d %H:%M} UTC"


def gpu_hours(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f} GPU-h"
