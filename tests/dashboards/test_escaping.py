"""Names that are markup stay text in every output format: the weekly report's Markdown (rendered by GitHub's
own renderer, cmark-gfm with its autolinks and tables) and HTML (opened in headless Chromium, nothing fetched),
Slack payloads and plotly labels, on a warehouse whose job, team and user names and reasons are markup
(hostile_cluster)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import cmarkgfm
import hostile_cluster as hc
import pytest
from browser import Chromium
from cmarkgfm.cmark import Options

from preemptlens import escape
from preemptlens.analytics.alerts import Target, render
from preemptlens.cli import main
from preemptlens.config import Secret
from tests.hostile_peers import Huge

MARKUP = [
    "![x](http://127.0.0.1:9/x.png)", "<img src=x onerror=alert(1)>", "[click](javascript:alert(1))",
    "<script>alert(1)</script>", "www.evil.example", "http://evil.example/a", "mallory@evil.example",
    "*bold* _it_ ~~gone~~ `code`", "| a | b |", "&amp; &#60;", "<!channel> <@U1>", "$x^2$ :red[text]",
]


def gfm(text: str) -> str:
    return str(cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE))


@pytest.mark.parametrize("text", MARKUP)
def test_markdown_escape_renders_as_the_text_itself(text: str) -> None:
    html = gfm(f"Job {escape.markdown(text)} of team x")
    assert not re.search(r"<(a|img|script|strong|em|del|code|table)\b", html), html
    shown = re.sub(r"<[^>]+>", "", html).replace("\u2060", "")
    import html as html_module

    assert html_module.unescape(shown).strip() == f"Job {text} of team x"


@pytest.mark.parametrize("text", MARKUP)
def test_slack_escape_leaves_no_markup(text: str) -> None:
    escaped = escape.slack(text)
    assert "<" not in escaped and ">" not in escaped and "://" not in escaped
    assert not re.search(r"(?<![\u2060&])[*_~`](?!\u2060)", escaped.replace("&amp;", "").replace("&lt;", "")
                         .replace("&gt;", "")), escaped


@pytest.fixture(scope="module")
def tracker() -> Iterator[Huge]:
    with Huge(size=2, status=404) as peer:
        yield peer


@pytest.fixture(scope="module")
def report(tracker: Huge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("escaping")
    warehouse = hc.build(root / "w.duckdb", tracker.url)
    assert main(["--warehouse", str(warehouse), "report", "--week", "2026-W48", "--out", str(root / "out")]) == 0
    return root / "out"


def test_the_markdown_report_holds_no_markup_from_the_data(report: Path, tracker: Huge) -> None:
    text = (report / "preemptlens-2026-W48.md").read_text()
    html = gfm(text)
    assert not re.search(r"<(a|img|script)\b", html), re.findall(r"<(?:a|img|script)\b[^>]*>", html)
    assert "<table>" in html, "the report's own tables are still tables"
    h = hc.hostile(tracker.url)
    assert escape.markdown(h["JOB"]) in text, "the worst preemption's victim is there, as text"


def test_the_html_report_draws_names_as_text_and_fetches_nothing(report: Path, tracker: Huge) -> None:
    html = (report / "preemptlens-2026-W48.html").read_text()
    assert "<img src=http" not in html and "<script>alert" not in html
    with Chromium() as browser:
        browser.navigate((report / "preemptlens-2026-W48.html").as_uri())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            drawn = browser.call("Runtime.evaluate", {"returnByValue": True, "expression":
                                 "document.querySelectorAll('.plotly-graph-div svg.main-svg').length"})
            if drawn["result"]["value"]:
                break
            time.sleep(0.2)
        time.sleep(1)
        dom = json.loads(browser.call("Runtime.evaluate", {"returnByValue": True, "expression": """JSON.stringify({
            images: Array.from(document.querySelectorAll('img')).map(i => i.src),
            links: Array.from(document.querySelectorAll('a')).map(a => a.href),
            svgLinks: document.querySelectorAll('svg a').length,
            text: document.body.innerText})"""})["result"]["value"])
    assert not [i for i in dom["images"] if tracker.url in i], dom["images"]
    assert not [a for a in dom["links"] if "javascript:" in a or tracker.url in a], dom["links"]
    assert dom["svgLinks"] == 0
    assert hc.hostile(tracker.url)["JOB"] in dom["text"], "the name is shown, as itself"
    assert tracker.connections == 0


def test_a_slack_notice_of_a_markup_name_is_text() -> None:
    target = Target("team:x", Secret("http://127.0.0.1:9/x"), "slack")
    h = hc.hostile("http://127.0.0.1:9")
    row = {"title": f"Job {h['JOB']} was preempted", "rule": "victim_notice", "dedupe_key": "k",
           "created_at": __import__("datetime").datetime(2026, 11, 2),
           "payload": json.dumps({"text": f"Job {h['JOB']} ({h['NAME']}) of team {h['TEAM']}, user {h['USER']}: "
                                          f"{h['REASON']} Details: https://dash.example/mine",
                                  "facts": {}, "link": "https://dash.example/mine"})}
    body = json.loads(render(target, row))
    section = body["blocks"][1]["text"]["text"]
    assert "<" not in section and "://" not in section and "Details:" not in section
    assert body["blocks"][2]["elements"][1]["text"] == "<https://dash.example/mine|My preemptions>"
