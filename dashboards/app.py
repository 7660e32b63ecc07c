"""The preemptlens dashboard: `streamlit run dashboards/app.py` (or `preemptlens dashboard`).

Reads the configuration like every preemptlens command ($PREEMPTLENS_CONFIG,
PREEMPTLENS_WAREHOUSE__PATH ...), opens only the published snapshot of the
warehouse, and never writes. The sidebar's filters apply to every page.

Each run first finds out who is reading (dashboards.access): the pages a
reader's role may not open are not registered for their session at all, so
their URLs lead nowhere, and every query result is masked for the role.
"""

from __future__ import annotations

import hmac
import threading
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import streamlit as st

from preemptlens.analytics.alerts import MY_PREEMPTIONS_PATH
from preemptlens.config import Config, WarehouseSettings, load_config
from preemptlens.dashboards.access import (
    OPEN,
    AccessSettings,
    Reader,
    email_verified,
    header_groups,
    proxy_trusted,
    resolve,
)
from preemptlens.dashboards.data import (
    DashboardSettings,
    Filters,
    Options,
    page_queries,
    snapshot_version,
)
from preemptlens.dashboards.figures import TIMELINE_MARKERS
from preemptlens.dashboards.views_common import CONTEXT_KEY, Context, cached, duration
from preemptlens.errors import PreemptlensError
from preemptlens.reading.masking import EVERYTHING, MaskingSettings, is_hidden
from preemptlens.readonly import Limits

# Not "pages": Streamlit would take a pages/ folder beside the entry script for its older multipage
# layout and, until the entry page has run once, serve a page URL without running this script.
PAGES = Path(__file__).resolve().parent / "app_pages"


# The time ranges the sidebar offers: days back from the newest data (None: all of it).
RANGES: dict[str, float | None] = {
    "Last 24 hours": 1, "Last 7 days": 7, "Last 30 days": 30, "Last 90 days": 90, "All data": None,
}
CUSTOM = "Custom dates"
# How often the page looks for a new snapshot of the warehouse (Grafana's auto-refresh).
REFRESH = {"Off": None, "Every minute": 60, "Every 5 minutes": 300, "Every 15 minutes": 900}


def _window(options: Options, default_days: int) -> tuple[datetime, datetime]:
    """The sidebar's time range: a relative one ("Last 7 days") ends at the newest data, not at the wall clock,
    so that a warehouse whose collection stopped still shows its last days (and the sidebar says how old they
    are); custom dates are whole UTC days."""
    newest = options.last or datetime.now(UTC)
    first = options.first or newest
    ranges = dict(RANGES)
    if default_days not in ranges.values():
        ranges[f"Last {default_days} days"] = default_days
    labels = [*sorted((k for k in ranges if ranges[k] is not None), key=lambda k: ranges[k] or 0),
              "All data", CUSTOM]
    default = next(k for k in labels if ranges.get(k) == default_days)
    choice = st.sidebar.selectbox("Time range", labels, index=labels.index(default), key="range",
                                  help="Relative ranges end at the newest record in the warehouse.")
    if choice == CUSTOM:
        last, start_default = newest.date(), max(first.date(), newest.date() - timedelta(days=default_days - 1))
        picked = st.sidebar.date_input(
            "Days (UTC)", value=(start_default, last), min_value=first.date(), max_value=last, key="window",
            help="Days included, first to last.",
        )
        days = [d for d in picked if isinstance(d, date)] if isinstance(picked, tuple | list) else [picked]
        start_day = days[0] if days else start_default
        end_day = days[-1] if days else last
        return (datetime.combine(start_day, time(), tzinfo=UTC),
                datetime.combine(end_day + timedelta(days=1), time(), tzinfo=UTC))
    back = ranges[choice]
    if back is not None and back < 2:
        # The hour after the newest record, so that it is inside the half-open window.
        end = newest.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    else:
        end = datetime.combine(newest.date() + timedelta(days=1), time(), tzinfo=UTC)
    # A range reaching back before the data starts at the data's first day.
    first_day = datetime.combine(first.date(), time(), tzinfo=UTC)
    return (first_day if back is None else max(first_day, end - timedelta(days=back))), end


def _freshness(options: Options) -> None:
    """Say how old the newest data is when it is older than a day: a relative range ends there."""
    if options.last is None:
        return
    age = datetime.now(UTC) - options.last
    if age > timedelta(days=1):
        st.sidebar.warning(
            f"The newest record is from {options.last:%Y-%m-%d %H:%M} UTC, {duration(age.total_seconds())} ago: "
            "time ranges end there.", icon=":material/schedule:")


def _auto_refresh(warehouse: str, limits: Limits, version: float) -> None:
    """Look for a new snapshot every so often and rerun the page when one is published."""
    every = REFRESH[st.sidebar.selectbox("Auto-refresh", list(REFRESH), key="refresh",
                                         help="Reruns the page when a new snapshot of the warehouse is published.")]
    if every is None:
        return

    @st.fragment(run_every=every)
    def watch() -> None:
        try:
            newer = snapshot_version(warehouse, limits) != version
        except PreemptlensError:
            return  # the next full run shows the error
        if newer:
            st.rerun(scope="app")

    watch()


def pages_for(reader: Reader) -> list[Any]:
    """The pages `reader` may open. A team member lands on their own preemptions, everyone else on the
    Overview; My preemptions is at /mine for every reader (victim notices link there), and only an admin
    gets Operations (raw quarantined records, alert delivery errors) and SQL (every table)."""
    team_member = bool(reader.teams) and not reader.admin
    mine = st.Page(PAGES / "mine.py", title="My preemptions", icon=":material/person:", url_path=MY_PREEMPTIONS_PATH)
    overview = st.Page(PAGES / "overview.py", title="Overview", icon=":material/dashboard:", url_path="overview")
    landing, landing_file = (mine, "mine.py") if team_member else (overview, "overview.py")
    pages = [
        landing,
        *(p for p in (overview, mine) if p is not landing),
        st.Page(PAGES / "preemptions.py", title="Preemptions", icon=":material/bolt:"),
        st.Page(PAGES / "hoarding.py", title="Idle hoarding", icon=":material/hourglass_empty:"),
        st.Page(PAGES / "scope_creep.py", title="Priority scope creep", icon=":material/trending_up:"),
        st.Page(PAGES / "tuning.py", title="Tuning", icon=":material/tune:"),
        st.Page(PAGES / "pilot.py", title="Pilot", icon=":material/science:"),
        # Streamlit serves its default page at / only: every page keeps its own path for every reader (/mine in
        # victim notices, /overview in a link one reader pastes to another), and / is a hidden copy of the page
        # this reader lands on.
        st.Page(PAGES / landing_file, title=landing.title, url_path="home", default=True, visibility="hidden"),
    ]
    if reader.admin:
        pages += [
            st.Page(PAGES / "operations.py", title="Operations", icon=":material/build:"),
            st.Page(PAGES / "sql.py", title="SQL", icon=":material/terminal:"),
        ]
    return pages


def _warm(ctx: Context) -> None:
    try:
        rows, top_n = ctx.settings.table_rows, ctx.settings.top_n
        for name, *args in page_queries(ctx.filters, rows=rows, top_n=top_n, markers=TIMELINE_MARKERS):
            cached(name, ctx.warehouse, ctx.limits, ctx.version, ctx.scope, *args)
        # The Preemptions page opens on the story of its worst victim (most work thrown away).
        victims = cached("top_victims", ctx.warehouse, ctx.limits, ctx.version, ctx.scope, ctx.filters, rows)
        victims = victims.filter(~is_hidden("victim_job_id"))
        if victims.height:
            first = victims.row(0, named=True)
            cached("victim_detail", ctx.warehouse, ctx.limits, ctx.version, ctx.scope, first["cluster"],
                   first["victim_job_id"])
    except PreemptlensError:
        return  # the page that needs the figure shows the error itself


@st.cache_resource(show_spinner=False, max_entries=64)
def _warm_up(ctx: Context) -> threading.Thread:
    thread = threading.Thread(target=_warm, args=(ctx,), name="preemptlens-warm-up", daemon=True)
    thread.start()
    return thread


def _header(name: str) -> str | None:
    """The one value of request header `name`; None when absent or sent more than once (a proxy that
    appends to a reader's own header instead of replacing it must not let the reader's value through)."""
    values = st.context.headers.get_all(name)
    return (values[0].strip() or None) if len(values) == 1 else None


def _text(claim: object) -> str | None:
    return str(claim) if isinstance(claim, str | int) and not isinstance(claim, bool) and str(claim) else None


def _reader(config: Config) -> Reader | None:
    """Who is reading, by the configured login; None when nobody is logged in (the caller says why)."""
    access = config.of(AccessSettings)
    others = config.of(MaskingSettings).show_other_teams_jobs
    if access.proxy_headers:
        if not proxy_trusted(access, st.get_option("server.address"), st.context.ip_address):
            st.error("This connection does not come through the configured auth proxy (access.proxy_addresses).")
            st.stop()
        secret = access.proxy_secret
        sent = _header(access.proxy_secret_header)
        if secret is not None and not (sent and hmac.compare_digest(sent.encode(), secret.reveal().encode())):
            st.error("This connection does not come through the configured auth proxy (access.proxy_secret).")
            st.stop()
        user, email = _header(access.proxy_user_header), _header(access.proxy_email_header)
        if user is None and email is None:
            return None
        return resolve(access, user, email, header_groups(_header(access.proxy_groups_header)), "proxy", others)
    if access.oidc:
        if not st.user.is_logged_in:
            return None
        claims = {key: st.user.get(key) for key in ("email", "email_verified")}
        claim = st.user.get(access.oidc_groups_claim)
        groups = tuple(str(g) for g in claim) if isinstance(claim, list) else header_groups(_text(claim))
        # The configured claim names the reader; an email counts only once the provider verified it.
        email = email_verified(claims)
        name = _text(st.user.get(access.oidc_user_claim))
        if access.oidc_user_claim == "email":
            name = email
        if name is None:
            return resolve(access, _text(st.user.get("sub")), email, groups, "oidc", others, login_names_user=False)
        return resolve(access, name, email, groups, "oidc", others)
    return OPEN


def _login(config: Config) -> None:
    st.title("preemptlens")
    if config.of(AccessSettings).oidc:
        st.info("Log in to see your preemptions and the cluster's figures.")
        if st.button("Log in", type="primary", key="login"):
            st.login()
    else:
        st.error("No user came with this request: open the dashboard through its auth proxy.")
    st.stop()


def _identity(reader: Reader) -> None:
    if reader.via == "open":
        st.sidebar.caption("Open: no login configured, so the dashboard listens on this host only.")
        return
    st.sidebar.caption(f"Signed in as **{reader.user}** ({reader.role}).")
    if reader.via == "oidc" and st.sidebar.button("Log out", key="logout"):
        st.logout()


def main() -> None:
    st.set_page_config(page_title="preemptlens", page_icon=":material/timer:", layout="wide")
    try:
        config = load_config()
        warehouse = config.of(WarehouseSettings).path
        limits = config.of(Limits)
        version = snapshot_version(warehouse, limits)
        # The filters' values (clusters, pools, teams, tiers) are no job's: the same for every reader.
        options: Options = cached("options", warehouse, limits, version, EVERYTHING)
    except PreemptlensError as exc:
        st.error(f"preemptlens dashboard: {exc}")
        st.stop()
    settings = config.of(DashboardSettings)
    who = _reader(config)
    if who is None:
        _login(config)
        return
    _identity(who)

    st.sidebar.markdown("### Filters")
    start, end = _window(options, settings.default_days)
    _freshness(options)
    filters = Filters(
        start=start,
        end=end,
        clusters=tuple(st.sidebar.multiselect("Cluster", options.clusters, key="clusters")),
        pools=tuple(st.sidebar.multiselect("Pool", options.pools, key="pools")),
        teams=tuple(st.sidebar.multiselect("Team", options.teams, key="teams")),
        tiers=tuple(st.sidebar.multiselect("Tier", options.tiers, key="tiers")),
        # A team's reader filtering by team means their victims, not the jobs their jobs preempted.
        victim_teams=bool(who.teams) and not who.admin,
    )
    st.sidebar.caption(
        f"Warehouse `{Path(warehouse).name}`, snapshot of {datetime.fromtimestamp(version, UTC):%Y-%m-%d %H:%M} UTC. "
        "An empty filter means all."
    )
    _auto_refresh(warehouse, limits, version)
    ctx = Context(warehouse, limits, version, filters, options, settings, who)
    st.session_state[CONTEXT_KEY] = ctx
    st.navigation(pages_for(who)).run()
    # Once per snapshot and filters, after the page the reader opened has its figures (so that
    # the two do not share the CPU), the other pages' queries fill the cache in the background.
    _warm_up(ctx)


main()
