"""`preemptlens dashboard`: serve the Streamlit dashboard (dashboards/app.py) until interrupted.

The command becomes the Streamlit server (exec), so stopping it stops the server. The server is
started through dashboards.launch, which warms the process (imports, plotly, the warehouse
snapshot) before it listens, so that the first reader after a start does not pay for it.

The dashboard process reads the same configuration file and this warehouse
(also when it came from --warehouse), and only ever the published snapshot.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preemptlens.config import Config

APP = Path(__file__).parents[1] / "dashboards" / "app.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, help="port to serve on (default: dashboard.port)")
    parser.add_argument("--address", help="address to listen on (default: dashboard.address)")


# A served dashboard is not edited in place: without Streamlit's file watcher
# each new session starts with half the server CPU.
SERVED = ("--server.headless", "true", "--server.fileWatcherType", "none",
          "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer")


def launch(app: Path, *options: str) -> list[str]:
    """The served dashboard's command line: `streamlit run app` with SERVED and `options`, in a warmed process."""
    return [sys.executable, "-m", "preemptlens.dashboards.launch", str(app), *SERVED, *options]


def command(args: argparse.Namespace, config: Config) -> list[str]:
    settings = config.section("dashboard")
    return launch(
        APP,
        "--server.port",
        str(args.port or settings["port"]),
        "--server.address",
        str(args.address or settings["address"]),
    )


def run(args: argparse.Namespace, config: Config) -> int:
    env = {**os.environ, "PREEMPTLENS_WAREHOUSE__PATH": str(config.get("warehouse.path"))}
    if config.path is not None:
        env["PREEMPTLENS_CONFIG"] = str(config.path.resolve())
    settings = config.section("dashboard")
    address, port = args.address or settings["address"], args.port or settings["port"]
    print(f"dashboard on http://{address}:{port} (Ctrl-C stops it)", flush=True)
    # Streamlit takes over this process, so a supervisor's signals reach it directly.
    argv = command(args, config)
    # The mask survives the exec: a Ctrl-C while the new interpreter starts waits for dashboards.launch,
    # which unblocks it once its handler (one line, status 130) is in place.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        os.execve(argv[0], argv, env)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    return 0  # not reached: execve returns only by raising
