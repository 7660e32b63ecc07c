"""Ctrl-C while `preemptlens dashboard` or `preemptlens serve` starts: one line, no traceback, as real processes.

The moment is read from the processes' own output, so each SIGINT lands in the phase it names: the
warm-up (dashboards.launch says when it begins and takes seconds more), or the exec into the launcher.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import Empty, Queue

from browser import free_port

ROOT = Path(__file__).resolve().parents[2]
WARMING = "dashboard warming up"
INTERRUPTED = "preemptlens dashboard: interrupted"


class Output:
    """Lines of a process's merged stdout and stderr, read on a thread, waited for by content."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: Queue[str | None] = Queue()
        assert process.stdout is not None
        stream = process.stdout
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, text: str, timeout_s: float = 120) -> None:
        while True:
            try:
                line = self._queue.get(timeout=timeout_s)
            except Empty:
                raise AssertionError(f"{text!r} not printed within {timeout_s} s: {self.text()}") from None
            if line is None:
                raise AssertionError(f"exited before printing {text!r}: {self.text()}")
            self.lines.append(line)
            if text in line:
                return

    def text(self) -> str:
        self._thread.join(timeout=60)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)


@contextmanager
def started(argv: list[str], cwd: Path) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    # Its own session: a signal to its group reaches it and its children, as Ctrl-C in a terminal does.
    process = subprocess.Popen(
        [sys.executable, "-m", "preemptlens.cli", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        yield process, Output(process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


def interrupted_at(marker: str, argv: list[str], cwd: Path) -> tuple[int, str]:
    """Start `preemptlens argv`, press Ctrl-C once it prints `marker`; its exit status and all it printed."""
    with started(argv, cwd) as (process, output):
        output.wait_for(marker)
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(timeout=60)
    return status, output.text()


def dashboard_argv(warehouse: Path) -> list[str]:
    return ["--warehouse", str(warehouse), "dashboard", "--address", "127.0.0.1", "--port", str(free_port())]


def test_ctrl_c_during_the_warm_up_ends_the_dashboard_with_one_line(sim_warehouse: Path, tmp_path: Path) -> None:
    status, text = interrupted_at(WARMING, dashboard_argv(sim_warehouse), tmp_path)
    assert status == 130, text
    assert "Traceback" not in text
    assert "dashboard warmed in" not in text, "the interrupt came after the warm-up"
    assert [line for line in text.splitlines() if "interrupted" in line] == [
        "preemptlens dashboard: interrupted while starting"
    ]


def test_ctrl_c_as_the_command_hands_over_to_the_launcher_is_not_lost(sim_warehouse: Path, tmp_path: Path) -> None:
    """Sent as soon as the command prints its address, the signal reaches it before or after the exec into
    dashboards.launch: either way, one line and status 130."""
    status, text = interrupted_at("dashboard on http://", dashboard_argv(sim_warehouse), tmp_path)
    assert status == 130, text
    assert "Traceback" not in text
    assert "You can now view" not in text
    assert len([line for line in text.splitlines() if line.startswith(INTERRUPTED)]) == 1, text


def test_ctrl_c_while_serve_warms_its_dashboard_stops_both_cleanly(sim_warehouse: Path, tmp_path: Path) -> None:
    # A warehouse with data, as the dashboard's own test has: an empty one warms in less time than the signal
    # takes to arrive, and the dashboard is then running, not starting.
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(sim_warehouse, warehouse)
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[warehouse]\npath = "{warehouse}"\n'
        f'[serve]\njobs = ["alerts", "dashboard"]\nalerts_interval_s = 3600\n'
        "metrics_port = 0\n"
        f"[dashboard]\nport = {free_port()}\n"
        "[alerts]\nrules = []\n"
    )
    status, text = interrupted_at(WARMING, ["--config", str(config), "serve"], tmp_path)
    # serve itself was running its jobs: it stops as it does for SIGTERM (status 0); its dashboard child
    # was still starting and says so in one line.
    assert status == 0, text
    assert "Traceback" not in text
    assert "dashboard warmed in" not in text, "the interrupt came after the warm-up"
    assert [line for line in text.splitlines() if "interrupted" in line] == [
        "preemptlens dashboard: interrupted while starting"
    ]
    assert "stopped" in text.splitlines()[-1]
