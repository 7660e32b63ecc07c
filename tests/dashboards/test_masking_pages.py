"""Masking and escaping, page by page, in headless Chromium: a team's reader (masking.show_other_teams_jobs =
false) opens every page and nothing the server sends it (every WebSocket frame: tables, charts, text) holds
another team's job id, user or node, not even in their own preemptions' preemptor or the scheduler's reason;
an admin's pages hold them. Names that are markup (hostile_cluster) never become an image, a link or HTML on any
page, and nothing ever fetches from the address they point at."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hostile_cluster as hc
import pytest
from browser import Chromium, Dashboard

from tests.hostile_peers import Huge

PAGES = ("", "overview", "preemptions", "hoarding", "scope_creep", "tuning", "pilot")
CONFIG = """
[masking]
show_other_teams_jobs = false
[access]
proxy_headers = true
users = { "llm-user8" = "team:llm", ops = "admin" }
"""


class Recorded:
    """What the server sent the browser over its WebSocket, frame by frame (CDP's Network events)."""

    def __init__(self, browser: Chromium) -> None:
        self.frames: list[bytes] = []

        def call(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
            browser._id += 1
            browser.ws.send(json.dumps({"id": browser._id, "method": method, "params": params or {}}))
            while True:
                message = json.loads(browser.ws.recv())
                if message.get("method") == "Network.webSocketFrameReceived":
                    response = message["params"]["response"]
                    data = response["payloadData"]
                    self.frames.append(base64.b64decode(data) if response.get("opcode") == 2 else data.encode())
                if message.get("id") == browser._id:
                    if "error" in message:
                        raise RuntimeError(f"CDP {method}: {message['error']}")
                    return dict(message.get("result", {}))

        browser.call = call  # type: ignore[method-assign]

    def holding(self, text: str) -> int:
        needle = text.encode()
        return sum(needle in frame for frame in self.frames)


@pytest.fixture(scope="module")
def tracker() -> Iterator[Huge]:
    with Huge(size=2, status=404) as peer:
        yield peer


@pytest.fixture(scope="module")
def served(tracker: Huge, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dashboard, Path]]:
    root = tmp_path_factory.mktemp("masking")
    warehouse = hc.build(root / "w.duckdb", tracker.url)
    config = root / "preemptlens.toml"
    config.write_text(CONFIG)
    config.chmod(0o600)
    program = (sys.executable, "-m", "preemptlens.cli", "--config", str(config))
    with Dashboard(warehouse, root / "streamlit.log", program=program) as dashboard:
        yield dashboard, warehouse


def visit(dashboard: Dashboard, user: str, path: str) -> tuple[Recorded, str, dict[str, Any]]:
    """Open `path` as `user` (the loopback proxy's headers) in a fresh browser; what was sent, the page's text,
    and what the DOM holds that markup would have made."""
    with Chromium() as browser:
        recorded = Recorded(browser)
        browser.call("Network.enable")
        browser.call("Network.setExtraHTTPHeaders", {"headers": {"X-Forwarded-User": user}})
        browser.navigate(f"{dashboard.url}/{path}")
        state, seconds = browser.wait_rendered(timeout_s=120)
        assert state.rendered and not state.exceptions and not state.errors, (user, path, seconds, state.text[:300])
        dom = browser.call("Runtime.evaluate", {"returnByValue": True, "expression": """JSON.stringify({
            images: Array.from(document.querySelectorAll('[data-testid="stMain"] img')).map(i => i.src),
            links: Array.from(document.querySelectorAll('[data-testid="stMain"] a')).map(a => a.href),
            scripts: document.querySelectorAll('[data-testid="stMain"] script').length,
            charts: Array.from(document.querySelectorAll('.js-plotly-plot')).map(
                g => JSON.stringify(g.data) + JSON.stringify(g.layout)).join(' '),
        })"""})["result"]["value"]
        return recorded, state.text, json.loads(dom)


@pytest.mark.parametrize("path", PAGES, ids=[p or "landing" for p in PAGES])
def test_a_team_reader_gets_no_other_teams_ids_on_any_page(
    served: tuple[Dashboard, Path], tracker: Huge, path: str
) -> None:
    dashboard, _ = served
    recorded, text, dom = visit(dashboard, hc.LLM_USER, path)
    assert recorded.frames, "no WebSocket frame recorded"
    # research's ids, and the job, name and user of the team whose name is markup (its name itself is public).
    leaked = {s: recorded.holding(s) for s in (*hc.RESEARCH_IDS, "job.png", "javascript:alert", "<!channel>")}
    assert not any(leaked.values()), f"/{path} sent {leaked}"
    for s in hc.RESEARCH_IDS:
        assert s not in text and s not in dom["charts"]
    assert not dom["images"] and not dom["scripts"], dom
    assert not [a for a in dom["links"] if "javascript:" in a or tracker.url in a], dom["links"]


def test_their_own_preemption_shows_itself_but_not_its_preemptor(served: tuple[Dashboard, Path]) -> None:
    dashboard, _ = served
    _, text, _ = visit(dashboard, hc.LLM_USER, "")
    flat = " ".join(text.split())
    assert "llm-job-7" in flat and "preempted by (another team #1)" in flat, flat[:600]
    # The scheduler's reason named the preemptor, its user and its node: each taken out.
    assert "Preempted by (another team) ((another team)) on (another team)" in flat, flat
    ledger, _, _ = visit(dashboard, hc.LLM_USER, "preemptions")
    assert ledger.holding("llm-boss-1"), "their team's job, a preemptor in the ledger, is theirs to see"


def test_an_admin_gets_every_job_and_still_no_markup(served: tuple[Dashboard, Path], tracker: Huge) -> None:
    dashboard, _ = served
    seen = 0
    for path in ("overview", "preemptions", "hoarding"):
        recorded, _, dom = visit(dashboard, "ops", path)
        seen += recorded.holding("research-job-42")
        assert not dom["images"] and not dom["scripts"], (path, dom)
        assert not [a for a in dom["links"] if "javascript:" in a or tracker.url in a], (path, dom["links"])
        # Plotly draws names as text: the HTML in them is escaped, not a tag.
        assert "<img" not in dom["charts"] and "<script" not in dom["charts"], path
    assert seen, "an admin's pages name research's jobs (the test can tell a masked page from an unmasked one)"
    assert tracker.connections == 0, "a page fetched from an address a job's name holds"


def test_a_team_readers_team_filter_means_their_victims(served: tuple[Dashboard, Path]) -> None:
    """Team llm's story must open on llm's victim, not on research-job-9, which llm's job preempted."""
    from datetime import UTC, datetime

    from preemptlens.dashboards import data
    from preemptlens.reading.masking import Scope

    _, warehouse = served
    window = dict(start=datetime(2026, 11, 1, tzinfo=UTC), end=datetime(2026, 12, 1, tzinfo=UTC), teams=("llm",))
    with data.reader(warehouse, scope=Scope(False, ("llm",))) as r:
        theirs = data.top_victims(r, data.Filters(**window, victim_teams=True), 50)  # type: ignore[arg-type]
        either = data.top_victims(r, data.Filters(**window), 50)  # type: ignore[arg-type]
    assert theirs["victim_team"].to_list() == ["llm"] and theirs["victim_job_id"].to_list() == ["llm-job-7"]
    assert set(either["victim_team"]) > {"llm"}, "an admin's filter still finds the preemptions llm caused"
