"""dashboards.launch, the way `preemptlens dashboard` and `preemptlens serve` start the server: it warms the
process before the server answers, then serves the app with every option it was given, seen in Chromium."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from browser import Chromium, Dashboard, free_port

from preemptlens.commands import dashboard

# Shows, on its first run in the server, what the launcher left in the process and the options in force.
PROBE = """
import sys

import streamlit as st

from preemptlens.dashboards import data

st.title("TITLE")
st.metric("file watcher", st.get_option("server.fileWatcherType"))
st.metric("toolbar", st.get_option("client.toolbarMode"))
st.metric("address", f"{st.get_option('server.address')}:{st.get_option('server.port')}")
st.metric("configuration modules imported", str("preemptlens.collectors.kubernetes" in sys.modules))
st.metric("unset section modules imported", str("preemptlens.collectors.prometheus" in sys.modules))
st.metric("snapshots open", len(data._OPEN))
"""


class Launched(Dashboard):
    """`app` served by dashboards.launch with `preemptlens dashboard`'s options and any `options` after them."""

    def __init__(self, app: Path, warehouse: Path, log: Path, *options: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
        env["PREEMPTLENS_WAREHOUSE__PATH"] = str(warehouse)
        # A section the configuration sets: its module is imported by load_config, in the launcher's warm-up.
        env["PREEMPTLENS_KUBERNETES__CONTEXT"] = "gpu-east"
        argv = dashboard.launch(app, "--server.port", str(self.port), "--server.address", "127.0.0.1", *options)
        self.serve(argv, log, env)


def shown(text: str) -> dict[str, str]:
    return dict(re.findall(r"^([a-z ]+)\n+(.+)$", text, flags=re.MULTILINE))


def file_change_prompt(browser: Chromium, app: Path, seconds: float) -> bool:
    """Edit the app under the open page: does Streamlit offer to rerun it (its file watcher saw the edit)
    within `seconds`? Waiting for the offer, give it a deadline load cannot exhaust (the watcher polls, the
    page must hear of it); ruling it out, a few seconds show a watcher that is off."""
    app.write_text(app.read_text().replace('st.title("Launched")', 'st.title("Edited")'))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        body = browser.call("Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True})
        if "File change." in body["result"]["value"]:
            return True
        time.sleep(0.2)
    return False


def test_the_launcher_warms_the_server_then_serves_the_app_with_its_options(
    sim_warehouse: Path, tmp_path: Path
) -> None:
    app = tmp_path / "probe.py"
    app.write_text(PROBE.replace("TITLE", "Launched"))
    log = tmp_path / "streamlit.log"
    with Launched(app, sim_warehouse, log) as served, Chromium() as browser:
        browser.navigate(served.url)
        state, seconds = browser.wait_rendered(timeout_s=120, title="Launched")
        assert state.rendered and not state.exceptions, f"not rendered in {seconds:.1f} s: {state.text}"
        assert shown(state.text) == {
            "file watcher": "none",
            "toolbar": "viewer",
            "address": f"127.0.0.1:{served.port}",
            "configuration modules imported": "True",
            "unset section modules imported": "False",
            "snapshots open": "1",
        }
        assert not file_change_prompt(browser, app, seconds=3)
    output = log.read_text()
    assert "dashboard warmed in" in output
    assert output.index("dashboard warmed in") < output.index("You can now view")


def test_an_edited_app_is_offered_for_rerun_when_the_file_watcher_is_on(sim_warehouse: Path, tmp_path: Path) -> None:
    """The control of the test above: the same edit is seen once a later option turns the watcher on."""
    app = tmp_path / "probe.py"
    app.write_text(PROBE.replace("TITLE", "Launched"))
    with (
        Launched(app, sim_warehouse, tmp_path / "streamlit.log", "--server.fileWatcherType", "poll") as served,
        Chromium() as browser,
    ):
        browser.navigate(served.url)
        state, _ = browser.wait_rendered(timeout_s=120, title="Launched")
        assert shown(state.text)["file watcher"] == "poll"
        assert file_change_prompt(browser, app, seconds=180)
