"""`python -m preemptlens.dashboards.launch <app.py> [streamlit run options]`: the dashboard's server, warmed first.

Streamlit runs the app's script in the server process, but only when a reader
connects, so the first reader after a start would pay for what every later one
finds done: the configuration's modules (load_config imports the module of
every section the configuration sets), polars, duckdb, pyarrow,
pandas (Streamlit converts a table through it), plotly's first figures and
their JSON (plotly loads its validators and templates on first use), and
opening the warehouse snapshot. `warm` does that work here, in the server
process, before the server listens: its health check answers only once the
first page can render like any later one. Then `main` hands over to
Streamlit's own command line (`streamlit run` with the same arguments).
Nothing here fills the query cache: the first page still runs its queries.

Ctrl-C before the server listens (while warming, or while Streamlit starts)
ends the process with one line and status 130 (SIGTERM likewise, status 143:
`serve` stopping on the same Ctrl-C sends it to its dashboard, which may not
have handled the Ctrl-C yet inside a long import); from then on Streamlit's own
handler stops the server. That is why the heavy imports happen in `warm`,
after the handler is in place, and not at the top of this module.

Streamlit listens on a Unix socket in the process's private folder, and the dashboard's address and port
are the front's (dashboards/front.py): the one way in, with a deadline per request and a share per peer.
The process runs without its working directory on the path (preemptlens.children) and without Streamlit's
`.streamlit/` of that folder (`no_project_config`).

`preemptlens dashboard` and `preemptlens serve` start the dashboard with it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from preemptlens.children import isolate
from preemptlens.errors import ConfigError, PreemptlensError

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from preemptlens.dashboards.front import Front

INTERRUPTED = 130


def sample_figures() -> list[go.Figure]:
    """One figure of every kind the pages draw (figures.*, and an empty one), over a few made-up rows."""
    import polars as pl

    from preemptlens.dashboards import data, figures

    day = datetime(2026, 1, 5, tzinfo=UTC)
    days = [day, day + timedelta(days=1)]
    window = (days[0], days[-1] + timedelta(days=1))
    preemption = {
        "time": day, "cluster": "c", "pool": "p", "victim_job_id": "1", "victim_run": 0, "victim_team": "a",
        "victim_tier": "low", "victim_gpus": 8, "preemptor_job_id": "2", "preemptor_tier": "high",
        "basis": "checkpoint", "lost_gpu_hours": 1.0, "wasted_gpu_hours": 1.5, "waiting_gpu_hours": 2.0,
    }
    run = {
        "run": 0, "start_time": day, "end_time": day + timedelta(hours=1), "state": "preempted",
    }
    detail = data.VictimDetail(
        job=pl.DataFrame({"job_id": ["1"]}),
        runs=pl.DataFrame([run]),
        preemptions=pl.DataFrame([preemption]),
        checkpoints=pl.DataFrame({"run": [0], "time": [day], "kind": ["checkpoint"], "step": [1]}),
    )
    weekly = pl.DataFrame({
        "week": [day.date()] * 2, "tier": ["high", "low"], "team": ["a", "b"],
        "gpu_hour_share": [0.4, 0.6], "high_gpu_hour_share": [0.4, 0.6],
    })
    holders = pl.DataFrame({"holder": ["a"], "idle_gpu_hours": [1.0], "longest_stretch_hours": [1.0]})
    return [
        figures.net_benefit(pl.DataFrame({
            "day": days, "gain_value": [1.0, 2.0], "cost_value": [1.0, 0.5], "net_value": [0.0, 1.5],
            "gain_gpu_hours": [1.0, 2.0], "wasted_gpu_hours": [1.0, 0.5], "waiting_gpu_hours": [0.5, 0.5],
        }), window=window),
        figures.preemption_timeline(pl.DataFrame([preemption]), total=1),
        figures.victim_runs(detail, "runs"),
        figures.idle_daily(
            pl.DataFrame({"day": days, "hoarded_gpu_hours": [1.0, 2.0], "unallocated_gpu_hours": [3.0, 4.0]}),
            window=window,
        ),
        figures.top_holders(holders, "holders"),
        figures.top_holders(holders.clear(), "no holders"),
        figures.tier_shares(weekly),
        figures.team_high_shares(weekly),
        figures.team_slopes(pl.DataFrame({"pool": ["p"], "team": ["a"], "high_share_slope": [0.01]})),
    ]


def warm() -> str:
    """Import, draw and open what a first page needs; say what was done and how long it took."""
    began = time.perf_counter()
    import duckdb
    import plotly.io
    import plotly.tools
    import polars as pl

    # What the pages import (the SQL page: preemptlens.readonly). dashboards.views_common is left to the first
    # page: Streamlit's cache decorators in it would warn that they are defined outside a running server.
    from preemptlens.config import WarehouseSettings, load_config
    from preemptlens.dashboards import data
    from preemptlens.reading.masking import EVERYTHING
    from preemptlens.readonly import Limits

    for fig in sample_figures():
        # As st.plotly_chart serialises a figure.
        plotly.io.to_json(plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True), validate=False)
    # st.dataframe sends any frame on through pandas, as Arrow.
    pl.DataFrame({"text": ["a"], "number": [1.0], "time": [datetime(2026, 1, 5, tzinfo=UTC)]}).to_pandas()
    try:
        config = load_config()
        warehouse = config.of(WarehouseSettings).path
        # data.reader keeps this connection open for the pages, which read with the same limits.
        with data.reader(warehouse, config.of(Limits), scope=EVERYTHING) as r:
            objects = r.frame("SELECT count(*) AS n FROM information_schema.tables")["n"][0]
        opened = f"snapshot of {warehouse} open ({objects} tables and views)"
    except (PreemptlensError, duckdb.Error) as exc:
        # The page shows the problem to its reader; the server starts all the same.
        opened = f"warehouse not opened: {exc}"
    return f"dashboard warmed in {time.perf_counter() - began:.1f} s, {opened}"


def _interrupted(signum: int, frame: FrameType | None) -> None:
    del frame
    print("preemptlens dashboard: interrupted while starting", file=sys.stderr, flush=True)
    # Exit on the spot rather than raise: a KeyboardInterrupt would print a traceback from whatever import
    # or Streamlit start-up step it lands in (click turns it into "Aborted!" and status 1). Nothing
    # started so far needs undoing: the snapshot is open read-only and nothing listens yet.
    os._exit(INTERRUPTED if signum == signal.SIGINT else 128 + signum)


def no_address_lookup() -> None:
    """Keep Streamlit from finding this machine's addresses by reaching out: it asks a web service for the
    external one (at start when it listens on every interface, and when a cross-origin WebSocket arrives)
    and "connects" a UDP socket to a public resolver for the internal one. preemptlens makes no outbound
    call but to its configured sources; the accepted hosts and origins come from dashboard.public_host."""
    from streamlit import net_util

    net_util.get_external_ip = lambda: None
    net_util.get_internal_ip = lambda: None


def no_project_config() -> None:
    """Keep Streamlit from reading `.streamlit/config.toml` and `.streamlit/secrets.toml` in the working
    directory, a folder the operator started in and others may write (docs/deploy.md): a planted one could
    set any server option the command line leaves at its default, or the login's secrets. The service user's
    own (~/.streamlit) and the app's folder (installed with preemptlens) are still read."""
    from streamlit import config, file_util

    everywhere = config.get_config_files

    def installed_and_own(file_name: str) -> list[str]:
        planted = file_util.get_project_streamlit_file_path(file_name)
        return [path for path in everywhere(file_name) if path != planted]

    config.get_config_files = installed_and_own


def _last(argv: list[str], option: str) -> str | None:
    """The value of Streamlit's `option` in `argv`, the last one given winning as on its command line."""
    found = None
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(option + "="):
            found = arg.split("=", 1)[1]
    return found


def short_path(folder: Path) -> Path:
    """`folder` by a name short enough for a Unix socket's path in it (at most 108 bytes, which a TMPDIR deep
    in a home folder exceeds): this process's descriptor of it under /proc/self/fd, kept open while it runs."""
    if len(os.fsencode(folder)) < 80:
        return folder
    descriptor = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    return Path(f"/proc/self/fd/{descriptor}")


def behind_front(argv: list[str], folder: Path) -> Front:
    """Streamlit listening on a Unix socket in `folder` (private: 0700), and the front that is the only way to
    it on the address and port of `argv` (dashboards/front.py), bound now and started by the caller."""
    from streamlit.web.server.starlette import starlette_server

    from preemptlens.config import load_config
    from preemptlens.dashboards.access import AccessSettings
    from preemptlens.dashboards.data import DashboardSettings
    from preemptlens.dashboards.front import Front, unlimited_peers
    from preemptlens.peers import Shares

    config = load_config()
    settings = config.of(DashboardSettings)
    try:
        unlimited = unlimited_peers(settings.proxy_users, config.of(AccessSettings).proxy_addresses)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    path = short_path(folder) / "streamlit.sock"

    def private_socket(server_address: str, bind_address: str, port: int, backlog: int) -> tuple[socket.socket, str]:
        # Streamlit's own bind (starlette_server._bind_server_socket), of a TCP port any local user can reach.
        del server_address, port
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(backlog)
        listener.setblocking(False)
        return listener, bind_address

    starlette_server._bind_server_socket = private_socket
    # Streamlit's empty address is every interface (allowed only with a login: dashboard.options); none given,
    # loopback.
    given = _last(argv, "--server.address")
    address = "127.0.0.1" if given is None else given or "0.0.0.0"
    port = int(_last(argv, "--server.port") or 8501)
    shares = Shares(settings.max_connections, settings.connections_per_peer, unlimited)
    return Front(address, port, path, shares)


def oidc_secrets(folder: Path) -> list[str]:
    """When access.oidc is on: Streamlit's `[auth]` settings, resolved from preemptlens's configuration
    (secrets by reference), in a secrets file only this user can read, and the option that points to it."""
    from preemptlens.config import load_config
    from preemptlens.dashboards.access import AccessSettings

    access = load_config().of(AccessSettings)
    if not access.oidc:
        return []
    # `preemptlens dashboard` does not start without them (access.config_problems); said again for a direct start.
    if access.oidc_cookie_secret is None or access.oidc_client_secret is None:
        raise ConfigError("access.oidc_cookie_secret and access.oidc_client_secret: needed when access.oidc is true")
    auth = {
        "redirect_uri": access.oidc_redirect_uri,
        "cookie_secret": access.oidc_cookie_secret.reveal(),
        "client_id": access.oidc_client_id,
        "client_secret": access.oidc_client_secret.reveal(),
        "server_metadata_url": access.oidc_metadata_url,
    }
    lines = [
        "[auth]", *(f"{k} = {json.dumps(v)}" for k, v in auth.items()), "",
        "[auth.client_kwargs]", 'scope = "openid profile email"', f"prompt = {json.dumps(access.oidc_prompt)}", "",
    ]
    path = folder / "secrets.toml"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write("\n".join(lines))
    return ["--secrets.files", str(path)]


def main(argv: list[str] | None = None) -> None:
    """Warm this process, then serve `streamlit run` with `argv` (the app, then Streamlit's options)."""
    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    # A direct start (`python -P -m preemptlens.dashboards.launch`) as much as one by preemptlens: the query
    # fork server this process starts is a `python -c`.
    isolate()
    # `preemptlens dashboard` blocks SIGINT across its exec into this process, so that a Ctrl-C before
    # this point is held rather than lost or raised in the interpreter's start-up; it is delivered now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # uvicorn takes the client's address from X-Forwarded-For only from peers it trusts: Streamlit's only peer
    # is the front, which drops every one a client sends and names the real peer (the auth-proxy check,
    # dashboards.access.proxy_trusted, reads it).
    os.environ["FORWARDED_ALLOW_IPS"] = "*"
    print("dashboard warming up", file=sys.stderr, flush=True)
    print(warm(), file=sys.stderr, flush=True)
    from streamlit.web import cli

    no_address_lookup()
    no_project_config()
    private = Path(tempfile.mkdtemp(prefix="preemptlens-dashboard-"))
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    options = sys.argv[1:] if argv is None else argv
    try:
        secrets = oidc_secrets(private)
        front = behind_front(options, private)
    except PreemptlensError as exc:
        print(f"preemptlens dashboard: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    except OSError as exc:
        print(f"preemptlens dashboard: cannot listen: {exc.strerror or exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    # It answers 503 until Streamlit listens behind it.
    front.start()
    # The `streamlit` command itself, called as `python -m streamlit` does; it exits when the server stops.
    # Streamlit puts its own SIGINT handler in place once the server listens.
    cli.main(["run", *options, *secrets], prog_name="streamlit")


if __name__ == "__main__":
    main()
