"""The real dashboard served by Streamlit, opened in headless Chromium over the DevTools protocol.

Used by the browser tests and by benchmarks/bench_dashboard.py. Plain CDP over
a websocket (websocket-client): no Selenium, no chromedriver.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import websocket

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)
# What a page shows once it has rendered: Streamlit has stopped running the script,
# and every plotly chart on it has drawn its SVG.
PAGE_STATE_JS = """
(() => {
  const running = document.querySelector(
      '[data-testid="stStatusWidgetRunningIcon"], [data-testid="stSkeleton"]') !== null;
  const app = document.querySelector('[data-testid="stMain"]');
  const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'));
  const drawn = charts.filter(c => c.querySelector('.js-plotly-plot svg.main-svg') !== null);
  const marks = charts.map(c => c.querySelectorAll('.trace, .point, .bars path').length);
  const h1 = document.querySelector('[data-testid="stMain"] h1');
  const content = document.querySelector('[data-testid="stMain"] :is([data-testid="stDataFrame"], ' +
      '[data-testid="stMetric"], [data-testid="stExpander"], [data-testid="stAlert"])') !== null;
  return JSON.stringify({
    running: running,
    ready: app !== null,
    title: h1 ? h1.innerText.trim() : null,
    charts: charts.length,
    drawn: drawn.length,
    content: content,
    marks: marks,
    exceptions: document.querySelectorAll('[data-testid="stException"]').length,
    errors: Array.from(document.querySelectorAll('[data-testid="stAlertContentError"]')).map(e => e.innerText),
    text: app ? app.innerText : ''
  });
})()
"""

# Clicks the sidebar link whose text (after its icon's name) is LABEL.
NAV_CLICK_JS = """
(() => {
  const link = Array.from(document.querySelectorAll('[data-testid="stSidebarNavLink"]'))
      .find(e => e.innerText.trim().split('\\n').pop().trim() === LABEL);
  if (link) { link.click(); return true; }
  return false;
})()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout_s} s")
        time.sleep(0.2)


class Server:
    """A server process a test starts and stops: its output goes to `log`, and it is up once `ready_url`
    answers; stopped (and reaped) on close, killed when it does not stop within 10 s."""

    process: subprocess.Popen[bytes]

    def start(self, argv: list[str], log: Path, ready_url: str, timeout_s: float,
              env: dict[str, str] | None = None) -> None:
        self._log = log.open("wb")
        self.process = subprocess.Popen(argv, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_http(ready_url, timeout_s)
        except TimeoutError:
            self.close()
            raise

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Dashboard(Server):
    """`preemptlens dashboard` on a free localhost port, reading `warehouse`."""

    def __init__(
        self, warehouse: Path, log: Path, port: int | None = None,
        program: tuple[str, ...] = (sys.executable, "-m", "preemptlens.cli"), env: dict[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        if env is None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
        self.serve([
            *program, "--warehouse", str(warehouse), "dashboard", "--port", str(self.port), "--address", "127.0.0.1",
        ], log, env)

    def serve(self, argv: list[str], log: Path, env: dict[str, str] | None = None, host: str = "127.0.0.1") -> None:
        """Start `argv`, a Streamlit server on `host`:self.port, and wait until it answers."""
        self.url = f"http://{host}:{self.port}"
        self.start(argv, log, f"{self.url}/_stcore/health", 60, env)



@dataclass
class PageState:
    running: bool
    ready: bool
    title: str | None
    charts: int
    drawn: int
    content: bool
    marks: list[int]
    exceptions: int
    errors: list[str]
    text: str

    @property
    def rendered(self) -> bool:
        """The script finished and every chart drew its SVG."""
        return self.ready and not self.running and self.title is not None and self.drawn >= self.charts

    @property
    def meaningful(self) -> bool:
        """The first meaningful render: the title and a first figure (a drawn chart, a table, a metric
        or a message) are on screen, while the rest of the page may still be coming."""
        return self.ready and self.title is not None and (self.drawn > 0 or self.content)


class Chromium:
    """Headless Chromium with a fresh profile, driven over one CDP page session."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise FileNotFoundError("chromium is not installed (tests/run.sh installs it)")
        self.width, self.height = width, height
        self.profile = Path(tempfile.mkdtemp(prefix="preemptlens-chromium-"))
        self.process = subprocess.Popen(
            [
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._id = 0
        try:
            self.port = self._devtools_port(30)
            targets = json.loads(self._devtools("json"))
            self._attach(next(t for t in targets if t["type"] == "page"))
        except BaseException:
            self.close()
            raise

    def _devtools(self, path: str, method: str = "GET") -> bytes:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/{path}", method=method)
        with urllib.request.urlopen(request, timeout=5) as response:
            return bytes(response.read())

    def _attach(self, target: dict[str, Any]) -> None:
        self.target = str(target["id"])
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )

    def fresh_tab(self) -> None:
        """Close the tab and continue in a new one, as a reader opening a link does: no page,
        script or websocket of the old tab survives (the browser's HTTP cache does)."""
        old = self.target
        self.ws.close()
        self._attach(json.loads(self._devtools("json/new?about:blank", method="PUT")))
        self._devtools(f"json/close/{old}")

    def _devtools_port(self, timeout_s: float) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not marker.exists() or not marker.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise TimeoutError("chromium did not open its DevTools port")
            time.sleep(0.1)
        return int(marker.read_text().splitlines()[0])

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params or {}}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"CDP {method}: {message['error']}")
                return dict(message.get("result", {}))

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def state(self) -> PageState:
        result = self.call("Runtime.evaluate", {"expression": PAGE_STATE_JS, "returnByValue": True})
        return PageState(**json.loads(result["result"]["value"]))

    def click_nav(self, label: str) -> None:
        """Switch page the way a reader does: click its link in the sidebar (no page reload)."""
        script = NAV_CLICK_JS.replace("LABEL", json.dumps(label))
        found = self.call("Runtime.evaluate", {"expression": script, "returnByValue": True})["result"]["value"]
        if not found:
            raise LookupError(f"no sidebar link {label!r}")

    def wait_page(
        self, began: float, timeout_s: float, title: str, charts: int = 0
    ) -> tuple[PageState, float | None, float | None]:
        """Poll until the page showing `title` rendered completely, with at least `charts` charts and
        a first figure, and stays so for 0.3 s: Streamlit shows its running icon only after a moment,
        so a page that has its title but not yet its charts or tables can look finished. Return the
        state, and the seconds since `began` (time.monotonic()) to its first meaningful render and to
        the complete one (None when not reached)."""
        first: float | None = None
        done: float | None = None
        while True:
            state = self.state()
            now = time.monotonic()
            if state.title == title and first is None and state.meaningful:
                first = now - began
            if state.title == title and state.rendered and state.meaningful and state.charts >= charts:
                done = done or now - began
                if now - began - done >= 0.3:
                    return state, first, done
            else:
                done = None
            if state.exceptions or state.errors or now - began > timeout_s:
                return state, first, done
            time.sleep(0.05)

    def wait_rendered(
        self, timeout_s: float, settle_s: float = 0.3, title: str | None = None
    ) -> tuple[PageState, float]:
        """Poll until the page rendered (and stays so for `settle_s`), showing `title` if given;
        return it and the seconds it took."""
        started = time.monotonic()
        stable_since: float | None = None
        while True:
            state = self.state()
            now = time.monotonic()
            done = state.rendered and (title is None or state.title == title)
            if done or state.exceptions or state.errors:
                stable_since = stable_since or now
                if now - stable_since >= settle_s or state.exceptions or state.errors:
                    return state, stable_since - started
            else:
                stable_since = None
            if now - started > timeout_s:
                return state, now - started
            time.sleep(0.05)

    def screenshot(self, path: Path) -> None:
        """The whole page: the viewport grows to the height of Streamlit's scrolling main block first."""
        height = self.call(
            "Runtime.evaluate",
            {
                "expression": "document.querySelector('[data-testid=\"stMainBlockContainer\"]').scrollHeight",
                "returnByValue": True,
            },
        )["result"]["value"]
        full = int(min(max(self.height, height + 80), 8000))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": full, "deviceScaleFactor": 1, "mobile": False},
        )
        time.sleep(0.5)
        shot = self.call("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )

    def screenshot_document(self, path: Path) -> None:
        """The whole of an ordinary (document-scrolling) page."""
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics["cssContentSize"]
        shot = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 12000), "scale": 1},
        })
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
