"""The preemptlens dashboard: `streamlit run dashboards/app.py` (or `preemptlens dashboard`).

Reads the configuration like every preemptlens command ($PREEMPTLENS_CONFIG,
PREEMPTLENS_WAREHOUSE__PATH ...), opens only the published snapshot of the
warehouse, and never writes. The sidebar's filters apply to every page.
"""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import streamlit as st

from preemptlens.config import load_config
from preemptlens.dashboards.data import Filters, Options, snapshot_version
from preemptlens.dashboards.figures import TIMELINE_MARKERS
from preemptlens.dashboards.views_common import CONTEXT_KEY, Context, cached
from preemptlens.errors import PreemptlensError
from preemptlens.readonly import Limits

# Not "pages": Streamlit would take a pages/ folder beside the entry script for its older multipage
# layout and, until the entry page has run once, serve a page URL without running this script.
PAGES = Path(__file__).resolve().parent / "app_pages"


def _window(options: Options, default_days: int) -> tuple[datetime, datetime]:
    last = (options.last or datetime.now(UTC)).date()
    first = (options.first or datetime.now(UTC)).date()
    default_start = max(first, last - timedelta(days=default_days - 1))
    picked = st.sidebar.date_input(
        "Time window (UTC)", value=(default_start, last), min_value=first, max_value=last, key="window",
        help="Days included, first to last.",
    )
    days = [d for d in picked if isinstance(d, date)] if isinstance(picked, tuple | list) else [picked]
    start_day = days[0] if days else default_start
    end_day = days[-1] if days else last
    return (
        datetime.combine(start_day, time(), tzinfo=UTC),
        datetime.combine(end_day + timedelta(days=1), time(), tzinfo=UTC),
    )


def _page_queries(ctx: Context) -> tuple[tuple[Any, ...], ...]:
    """Every query the pages run when they open with these filters, as (name, *args)."""
    f, top_n, rows = ctx.filters, int(ctx.settings["top_n"]), int(ctx.settings["table_rows"])
    return (
        ("headline", f), ("net_benefit", f), ("scorecard", f), ("evidence", f),
        ("costliest", f, TIMELINE_MARKERS), ("ledger_page", f, rows, 0), ("top_victims", f, rows),
        ("top_holders", f, "team", top_n), ("idle_daily", f), ("avoidable_rows", f, rows),
        ("tier_shares", f), ("team_high_shares", f), ("team_slopes", f), ("scope_trend", f),
        ("suggestions", f, top_n), ("catalog",),
    )


def _warm(ctx: Context) -> None:
    try:
        for name, *args in _page_queries(ctx):
            cached(name, ctx.warehouse, ctx.limits, ctx.version, *args)
        # The Preemptions page opens on the story of its costliest victim.
        rows = int(ctx.settings["table_rows"])
        victims = cached("top_victims", ctx.warehouse, ctx.limits, ctx.version, ctx.filters, rows)
        if victims.height:
            first = victims.row(0, named=True)
            cached("victim_detail", ctx.warehouse, ctx.limits, ctx.version, first["cluster"], first["victim_job_id"])
    except PreemptlensError:
        return  # the page that needs the figure shows the error itself


@st.cache_resource(show_spinner=False, max_entries=64)
def _warm_up(ctx: Context) -> threading.Thread:
    thread = threading.Thread(target=_warm, args=(ctx,), name="preemptlens-warm-up", daemon=True)
    thread.start()
    return thread


def main() -> None:
    st.set_page_config(page_title="preemptlens", page_icon=":material/timer:", layout="wide")
    try:
        config = load_config()
        warehouse = str(config.get("warehouse.path"))
        limits = Limits.from_config(config)
        version = snapshot_version(warehouse, limits)
        options: Options = cached("options", warehouse, limits, version)
    except PreemptlensError as exc:
        st.error(f"preemptlens dashboard: {exc}")
        st.stop()
    settings = config.section("dashboard")

    st.sidebar.markdown("### Filters")
    start, end = _window(options, int(settings["default_days"]))
    filters = Filters(
        start=start,
        end=end,
        clusters=tuple(st.sidebar.multiselect("Cluster", options.clusters, key="clusters")),
        pools=tuple(st.sidebar.multiselect("Pool", options.pools, key="pools")),
        teams=tuple(st.sidebar.multiselect("Team", options.teams, key="teams")),
        tiers=tuple(st.sidebar.multiselect("Tier", options.tiers, key="tiers")),
    )
    st.sidebar.caption(
        f"Warehouse `{Path(warehouse).name}`, snapshot of {datetime.fromtimestamp(version, UTC):%Y-%m-%d %H:%M} UTC. "
        "An empty filter means all."
    )
    ctx = Context(warehouse, limits, version, filters, options, settings)
    st.session_state[CONTEXT_KEY] = ctx

    pages = [
        st.Page(PAGES / "overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page(PAGES / "preemptions.py", title="Preemptions", icon=":material/bolt:"),
        st.Page(PAGES / "hoarding.py", title="Idle hoarding", icon=":material/hourglass_empty:"),
        st.Page(PAGES / "scope_creep.py", title="Priority scope creep", icon=":material/trending_up:"),
        st.Page(PAGES / "tuning.py", title="Tuning", icon=":material/tune:"),
        st.Page(PAGES / "pilot.py", title="Pilot", icon=":material/science:"),
        st.Page(PAGES / "sql.py", title="SQL", icon=":material/terminal:"),
    ]
    st.navigation(pages).run()
    # Once per snapshot and filters, after the page the reader opened has its figures (so that
    # the two do not share the CPU), the other pages' queries fill the cache in the background.
    _warm_up(ctx)


main()
