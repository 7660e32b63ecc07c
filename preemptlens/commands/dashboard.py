"""`preemptlens dashboard`: serve the Streamlit dashboard (dashboards/app.py) until interrupted.

The command becomes the Streamlit server (exec), so stopping it stops the server. The server is
started through dashboards.launch, which warms the process (imports, plotly, the warehouse
snapshot) before it listens, so that the first reader after a start does not pay for it.

The dashboard process reads the same configuration file and this warehouse
(also when it came from --warehouse), and only ever the published snapshot.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from preemptlens.children import environment, python
from preemptlens.config import listen_address, number_argument, text_argument
from preemptlens.errors import ConfigError

if TYPE_CHECKING:
    from preemptlens.config import Config

APP = Path(__file__).parents[1] / "dashboards" / "app.py"
log = logging.getLogger("preemptlens.dashboard")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=number_argument(int, 1, 65_535),
                        help="port to serve on (default: dashboard.port)")
    parser.add_argument("--address", type=text_argument(listen_address),
                        help="address to listen on (default: dashboard.address)")


# A served dashboard is not edited in place: without Streamlit's file watcher
# each new session starts with half the server CPU.
SERVED = ("--server.headless", "true", "--server.fileWatcherType", "none",
          "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer")


WILDCARDS = ("0.0.0.0", "::", "")


def launch(app: Path, *options: str) -> list[str]:
    """The served dashboard's command line: `streamlit run app` with SERVED and `options`, in a warmed process."""
    return python("-m", "preemptlens.dashboards.launch", str(app), *SERVED, *options)


def options(config: Config, port: int, address: str | None = None) -> list[str]:
    """Streamlit's options for a dashboard on `port` (and `address`, else dashboard.address), the same for
    `preemptlens dashboard` and `preemptlens serve`; raises ConfigError when [access] does not allow it.

    The address is always given: without one Streamlit listens on every interface and, headless, asks a
    web service for this machine's external address. A WebSocket naming a Host other than localhost, the
    listening address or dashboard.public_host is refused (a page on a foreign name that resolves here,
    DNS rebinding, cannot open a session), and only that public name is a cross-origin exception.
    Errors reach the reader as a generic message; the details go to the server log."""
    from preemptlens.dashboards.access import AccessSettings, config_problems, is_loopback
    from preemptlens.dashboards.data import DashboardSettings

    settings = config.of(DashboardSettings)
    address = address or settings.address
    public = settings.public_host.strip()
    access = config.of(AccessSettings)
    problems = config_problems(access, address)
    if not is_loopback(address) and not public:
        problems.append(f"dashboard.public_host: needed when the dashboard listens on {address or 'every address'}")
    if problems:
        raise ConfigError(
            f"{len(problems)} problem(s) with the dashboard's access:\n  - " + "\n  - ".join(problems),
            "see docs/deploy.md",
        )
    if access.proxy_headers and port >= unprivileged_ports_from():
        # The proxy sends every reader's identity (and access.proxy_secret) to this port: while the dashboard
        # is down, any local user could listen on it and receive them.
        log.warning(
            "dashboard.port %d: any user of this host can listen on it while the dashboard is down and receive "
            "the auth proxy's requests, identity headers and access.proxy_secret included; use a port below %d, "
            "which only the service (with CAP_NET_BIND_SERVICE) can take (docs/deploy.md)",
            port, unprivileged_ports_from(),
        )
    hosts = dict.fromkeys(h for h in ("localhost", "127.0.0.1", address, public) if h and h not in WILDCARDS)
    argv = [
        "--server.port", str(port), "--server.address", address,
        "--server.enableCORS", "true", "--server.enableXsrfProtection", "true",
        "--client.showErrorDetails", "none",
        "--browser.serverAddress", public or ("localhost" if address in WILDCARDS else address),
    ]
    for host in hosts:
        argv += ["--server.allowedHosts", host]
    if public:
        argv += ["--server.corsAllowedOrigins", f"https://{public}", "--server.corsAllowedOrigins", f"http://{public}"]
    return argv


def unprivileged_ports_from() -> int:
    """The first port any user may listen on (Linux's net.ipv4.ip_unprivileged_port_start, 1024 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    except (OSError, ValueError):
        return 1024


def command(args: argparse.Namespace, config: Config) -> list[str]:
    from preemptlens.dashboards.data import DashboardSettings

    return launch(APP, *options(config, int(args.port or config.of(DashboardSettings).port), args.address))


def run(args: argparse.Namespace, config: Config) -> int:
    from preemptlens.config import WarehouseSettings
    from preemptlens.dashboards.data import DashboardSettings

    env = environment({**os.environ, "PREEMPTLENS_WAREHOUSE__PATH": config.of(WarehouseSettings).path})
    if config.path is not None:
        env["PREEMPTLENS_CONFIG"] = str(config.path.resolve())
    settings = config.of(DashboardSettings)
    address, port = args.address or settings.address, args.port or settings.port
    # Built (and [access] checked) before anything is printed.
    argv = command(args, config)
    print(f"dashboard on http://{address}:{port} (Ctrl-C stops it)", flush=True)
    # Streamlit takes over this process, so a supervisor's signals reach it directly.
    # The mask survives the exec: a Ctrl-C while the new interpreter starts waits for dashboards.launch,
    # which unblocks it once its handler (one line, status 130) is in place.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        os.execve(argv[0], argv, env)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    return 0  # not reached: execve returns only by raising
