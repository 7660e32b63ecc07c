"""The weekly report: ISO weeks, the CLI, the HTML parsed section by section, the Markdown, and offline rendering."""

from __future__ import annotations

import json
import re
import shutil
import time
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import fixture_cluster as fc
import pytest
from browser import Chromium

from preemptlens.cli import main
from preemptlens.dashboards.report import ReportError, Week
from preemptlens.warehouse import Warehouse

SECTIONS = ("answer", "net-benefit", "worst-preemptions", "top-hoarders", "scope-creep", "suggestions")


class Page(HTMLParser):
    """Sections by id with their heading, tables (rows of cell texts) and plotly figures; every script tag."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.scripts: list[dict[str, str | None]] = []
        self._section: dict | None = None
        self._tag: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self._tag.append(tag)
        if tag == "section":
            self._section = self.sections.setdefault(str(a["id"]), {"h2": "", "tables": {}, "figures": [], "text": ""})
        elif tag == "script":
            self.scripts.append(a)
        elif self._section is not None:
            if tag == "table":
                self._table = self._section["tables"].setdefault(str(a.get("id")), [])
            elif tag == "tr":
                self._row = []
            elif tag in ("td", "th"):
                self._cell = []
            elif tag == "div" and "plotly-graph-div" in (a.get("class") or ""):
                self._section["figures"].append(a["id"])

    def handle_endtag(self, tag: str) -> None:
        if self._tag:
            self._tag.pop()
        if tag == "section":
            self._section = None
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._table.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._section is not None and self._tag and self._tag[-1] != "script":
            self._section["text"] += " " + data
            if self._tag[-1] == "h2":
                self._section["h2"] += data


def test_iso_weeks() -> None:
    week = Week.parse("2026-W48")
    assert (week.start, week.end) == (datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC))
    assert Week.parse("2026-W53").start == datetime(2026, 12, 28, tzinfo=UTC)  # 2026 has 53 ISO weeks
    assert Week.last_complete(datetime(2026, 12, 2, 8, tzinfo=UTC)).label == "2026-W48"
    assert Week.last_complete(datetime(2026, 1, 1, tzinfo=UTC)).label == "2025-W52"
    for bad in ("2026-48", "2026-W54", "W48", "2025-W53"):
        with pytest.raises(ReportError, match="--week"):
            Week.parse(bad)


@pytest.fixture(scope="module")
def written(cluster_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reports")
    assert main(["--warehouse", str(cluster_warehouse), "report", "--week", "2026-W48", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def page(written: Path) -> Page:
    parsed = Page()
    parsed.feed((written / "preemptlens-2026-W48.html").read_text())
    return parsed


def test_cli_writes_html_and_markdown_and_rerun_replaces_them(
    written: Path, cluster_warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sorted(p.name for p in written.iterdir()) == ["preemptlens-2026-W48.html", "preemptlens-2026-W48.md"]
    assert main(["--warehouse", str(cluster_warehouse), "report", "--week", "2026-W48", "--out", str(written)]) == 0
    assert sorted(p.name for p in written.iterdir()) == ["preemptlens-2026-W48.html", "preemptlens-2026-W48.md"]
    assert "weekly report 2026-W48: 3 preemptions" in capsys.readouterr().out
    assert main(["--warehouse", str(cluster_warehouse), "report", "--week", "2026-48"]) == 2
    assert "not an ISO week" in capsys.readouterr().err


def test_html_is_self_contained(page: Page, written: Path) -> None:
    # no script loads anything: plotly.js is inlined, so the file opens offline
    assert all(s.get("src") is None for s in page.scripts)
    html = (written / "preemptlens-2026-W48.html").read_text()
    assert "plotly.js v" in html or "Plotly" in html[:6_000_000]
    assert "cdn." not in html.split("</head>")[1]


def test_every_section_is_there(page: Page) -> None:
    assert list(page.sections) == list(SECTIONS)
    for name in SECTIONS:
        assert page.sections[name]["h2"], name
    assert page.sections["net-benefit"]["figures"] == ["fig-net-benefit"]
    assert page.sections["worst-preemptions"]["figures"] == ["fig-worst"]
    assert page.sections["top-hoarders"]["figures"] == ["fig-hoarders", "fig-idle-daily"]
    assert page.sections["scope-creep"]["figures"] == ["fig-tier-shares", "fig-team-shares"]


def test_net_benefit_section(page: Page) -> None:
    text = " ".join(page.sections["net-benefit"]["text"].split())
    # gains: two critical preemptors x 8 GPU-h x weight 4; costs: 1 x (20 + 12) + 0.5 x (8 + 8) + 0.5 x (4 + 8)
    assert "gained 64.0 and victims paid 46.0 tier-weighted GPU-hours: a net of 18.0" in text
    assert f"Preemptions {fc.PREEMPTIONS_W48}" in text
    # the two currencies apart: work thrown away 20 + 8 + 4 (no warm-ups), waiting 4 GPUs x 3 h + ...
    assert "Work thrown away GPU-hours 32.0" in text
    assert "lost progress 32.0 GPU-h plus warm-up" in text
    assert len(page.sections["net-benefit"]["tables"]["scorecard"]) == 1 + 4


def test_answer_section_comes_first_with_the_verdict(page: Page) -> None:
    # does preemption pay here: the verdict first, worded as the CLI and the dashboard word it
    text = " ".join(page.sections["answer"]["text"].split())
    assert "Verdict: c1: preemption should not be the main tool" in text
    assert "Adoption order:" in text


def test_worst_preemptions_section(page: Page) -> None:
    header, *rows = page.sections["worst-preemptions"]["tables"]["worst-table"]
    assert header[:2] == ["victim", "preemptor"]
    assert [r[0].split()[0] for r in rows] == [fc.WORST_W48, fc.AVOIDABLE_VICTIM, "train-w2"]
    worst = dict(zip(header, rows[0], strict=True))
    assert worst["preemptor"] == f"{fc.WORST_W48_PREEMPTOR} (infer, high)"
    assert worst["thrown away GPU-h"] == "20.0 (lost 20.0, assumed)"
    assert worst["waiting GPU-h"] == "12.0 (4 GPUs x 3.0 h)"
    assert [dict(zip(header, r, strict=True))["avoidable"] for r in rows] == ["no", "yes", "yes"]


def test_top_hoarders_section(page: Page) -> None:
    teams = page.sections["top-hoarders"]["tables"]["hoarders-teams"]
    assert teams[1][:2] == [fc.HOARDER_TEAM, f"{fc.HOARDED_GPU_HOURS:.1f}"]
    jobs = page.sections["top-hoarders"]["tables"]["hoarders-jobs"]
    assert jobs[1][0] == fc.HOARDER_JOB and jobs[1][2] == f"{fc.HOARDED_GPU_HOURS:.1f}"


def test_scope_creep_and_suggestions_sections(page: Page) -> None:
    header, *rows = page.sections["scope-creep"]["tables"]["scope-teams"]
    assert header == ["team", "this week", "week before", "change"]
    assert rows[0][0] == fc.SCOPE_TEAM and rows[0][1] == "100%" and rows[0][3].startswith("+")
    assert "No suggestions" in page.sections["suggestions"]["text"]


def test_markdown_summary(written: Path) -> None:
    text = (written / "preemptlens-2026-W48.md").read_text()
    assert text.startswith("**Preemption weekly report 2026-W48** (2026-11-23 to 2026-11-29 UTC")
    assert "**Net benefit:** 18.0 tier-weighted GPU-hours (gain 64.0, cost 46.0) from 3 preemptions" in text
    worst_row = next(line for line in text.splitlines() if line.startswith(f"| {fc.WORST_W48} "))
    assert "| 20.0 (lost 20.0, assumed) | 12.0 (4 GPUs x 3.0 h) |" in worst_row
    assert f"| {fc.HOARDER_TEAM} | 32.0 |" in text
    assert "<" not in text


def test_html_renders_offline_in_chromium(written: Path, screenshots: Path) -> None:
    with Chromium() as browser:
        browser.navigate((written / "preemptlens-2026-W48.html").as_uri())
        deadline = 30.0
        drawn = 0
        while deadline > 0:
            result = browser.call("Runtime.evaluate", {
                "expression": "document.readyState !== 'complete' ? [0, 0] : "
                "[document.querySelectorAll('.plotly-graph-div').length, "
                "document.querySelectorAll('.plotly-graph-div svg.main-svg').length > 0 ? "
                "Array.from(document.querySelectorAll('.plotly-graph-div')).filter("
                "d => d.querySelector('svg.main-svg')).length : 0]",
                "returnByValue": True,
            })
            figures, drawn = result["result"]["value"]
            if figures and drawn == figures:
                break
            time.sleep(0.2)
            deadline -= 0.2
        assert figures == 6 and drawn == figures
        browser.screenshot_document(screenshots / "report-2026-W48.png")
    assert (screenshots / "report-2026-W48.png").stat().st_size > 20_000


# Stored in rank order 1..3 with savings that sort the other way round, and long JSON snippets.
SUGGESTED = [
    (1, "not_yet", "", "Do not rely on preemption yet", "preemption as a main tool", None, None, 0.0),
    (2, "min_run_time", "", "Let runs finish 30 min before preemption", "minimum run time", "0 s", "30 min", 50.0),
    (3, "grace_time", "a100/nlp", "Give victims time to checkpoint", "grace time", "60 s", "5 min", 200.0),
]
LONG_SNIPPET = "PreemptExemptTime=00:30:00  # " + "a very long comment that must wrap, not widen the page " * 6


@pytest.fixture(scope="module")
def suggested(cluster_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("suggested")
    path = folder / "w.duckdb"
    shutil.copy(cluster_warehouse, path)
    with Warehouse(path) as wh:
        for rank, kind, subject, title, setting, now, proposed, saving in SUGGESTED:
            snippets = {"slurm": f"# {title}\n{LONG_SNIPPET}", "kueue": f"# {title}\nkind: ClusterQueue"}
            wh.con.execute(
                "INSERT INTO suggestions VALUES ('c1', TIMESTAMPTZ '2026-11-09 00:00:00+00', "
                "TIMESTAMPTZ '2026-11-30 00:00:00+00', $rank, $kind, $subject, $title, $setting, $now, $proposed, "
                "$evidence, $effect, NULL, NULL, NULL, $saving, $snippets, true, now())",
                {"rank": rank, "kind": kind, "subject": subject, "title": title, "setting": setting, "now": now,
                 "proposed": proposed, "evidence": f"evidence of {title}", "effect": f"effect of {title}",
                 "saving": saving, "snippets": json.dumps(snippets)},
            )
        wh.mark_changed()
    out = folder / "reports"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREEMPTLENS_REPORT__SCHEDULER", "slurm")
        assert main(["--warehouse", str(path), "report", "--week", "2026-W48", "--out", str(out)]) == 0
    return out


def test_suggestions_in_rank_order_with_the_clusters_own_snippet(suggested: Path) -> None:
    html = (suggested / "preemptlens-2026-W48.html").read_text()
    section = html[html.index('<section id="suggestions">'):]
    items = re.findall(r'<li class="suggestion">(.*?)</li>', section, flags=re.DOTALL)
    titles = [re.search(r'<div class="suggestion-title">(.*?) <span', item).group(1) for item in items]  # type: ignore[union-attr]
    assert titles == ["Do not rely on preemption yet", "Let runs finish 30 min before preemption",
                      "Give victims time to checkpoint — a100/nlp"]
    second = items[1]
    assert "<code>minimum run time</code>: 0 s → 30 min" in second
    assert "effect of Let runs finish 30 min before preemption (saving 50.0 GPU-h)" in second
    assert "evidence of Let runs finish 30 min before preemption" in second
    # the cluster's own scheduler's snippet in the open, every scheduler's behind a disclosure, no JSON anywhere
    own, disclosed = second.split("<details>")
    assert "For slurm:" in own and "PreemptExemptTime" in own and "ClusterQueue" not in own
    assert "<summary>" in disclosed and "ClusterQueue" in disclosed and "PreemptExemptTime" in disclosed
    assert '{"' not in section and "&#34;slurm&#34;" not in section


def test_suggestions_in_markdown_read_as_a_numbered_list(suggested: Path) -> None:
    text = (suggested / "preemptlens-2026-W48.md").read_text()
    section = text[text.index("**Top suggestions**"):]
    numbered = [line for line in section.splitlines() if re.match(r"^\d+\. ", line)]
    assert numbered == [
        "1. **Do not rely on preemption yet** (c1): `preemption as a main tool`",
        "2. **Let runs finish 30 min before preemption** (c1): `minimum run time` 0 s → 30 min",
        "3. **Give victims time to checkpoint — a100/nlp** (c1): `grace time` 60 s → 5 min",
    ]
    assert "   Expected effect: effect of Give victims time to checkpoint (saving 200.0 GPU-h)" in section
    assert "   Evidence: evidence of Give victims time to checkpoint" in section
    # no snippets, no JSON, no table in chat
    assert "PreemptExemptTime" not in section and "{" not in section and "|" not in section


def test_suggestions_html_fits_its_width_in_chromium(suggested: Path) -> None:
    with Chromium(width=1000, height=800) as browser:
        browser.navigate((suggested / "preemptlens-2026-W48.html").as_uri())
        deadline = 30.0
        while deadline > 0:
            ready = browser.call("Runtime.evaluate", {
                "expression": "document.readyState === 'complete'", "returnByValue": True,
            })["result"]["value"]
            if ready:
                break
            time.sleep(0.2)
            deadline -= 0.2
        widths = browser.call("Runtime.evaluate", {
            "expression": "document.querySelectorAll('details').forEach(d => d.open = true); "
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]",
            "returnByValue": True,
        })["result"]["value"]
    assert widths[0] <= widths[1], widths
