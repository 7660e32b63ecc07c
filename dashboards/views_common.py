"""What every page shares: the warehouse, the filters, cached queries and number formats.

The entry script (dashboards/app.py) builds one `Context` per rerun from the
sidebar and stores it in the session; pages read it with `context()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import streamlit as st

from dashboards.data import QUERIES, Filters, Options, reader
from preemptlens.errors import PreemptlensError
from preemptlens.readonly import Limits

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from streamlit.delta_generator import DeltaGenerator

CONTEXT_KEY = "preemptlens_context"


@st.cache_data(show_spinner=False, max_entries=512)
def _cached(query: str, warehouse: str, limits: Limits, version: float, args: tuple[Any, ...]) -> Any:
    del version  # only part of the cache key
    with reader(warehouse, limits) as r:
        return QUERIES[query](r, *args)


def cached(query: str, warehouse: str, limits: Limits, version: float, *args: Any) -> Any:
    """`QUERIES[query](reader, *args)`, memoised per snapshot version (see data.snapshot_version)."""
    return _cached(query, warehouse, limits, version, args)


@dataclass(frozen=True)
class Context:
    warehouse: str
    limits: Limits
    version: float
    filters: Filters
    options: Options
    settings: dict[str, Any]

    def q(self, query: str, *args: Any) -> Any:
        """A query from dashboards.data, memoised for this snapshot; a failure ends the page with its message."""
        try:
            return cached(query, self.warehouse, self.limits, self.version, *args)
        except PreemptlensError as exc:
            st.error(str(exc))
            st.stop()


@dataclass
class Charts:
    """A page's plotly charts, each in its place on the page but sent to the browser after the rest.

    The first chart a tab receives makes the browser load Streamlit's plotly.js chunk (4.7 MB):
    evaluating it holds the page's only JavaScript thread for a second or more on a busy machine,
    and a table or metric that arrives while it runs waits with it. Sent last, the charts cannot
    hold back the headline figures and tables, and their queries run after the others'."""

    _slots: list[tuple[DeltaGenerator, Callable[[], go.Figure], str]] = field(default_factory=list)

    def add(self, build: Callable[[], go.Figure], key: str) -> None:
        """Keep a place here for the chart `build()` returns, drawn by `draw`."""
        self._slots.append((st.empty(), build, key))

    def draw(self) -> None:
        for slot, build, key in self._slots:
            slot.plotly_chart(build(), key=key)
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
            parts.append(f"{name}: {', '.join(values)}")
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
