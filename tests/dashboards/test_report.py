"""The weekly report: ISO weeks, the CLI, the HTML parsed section by section, the Markdown, and offline rendering."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import fixture_cluster as fc
import pytest
from browser import Chromium

from preemptlens.cli import main
from preemptlens.dashboards.report import ReportError, Week

SECTIONS = ("net-benefit", "worst-preemptions", "top-hoarders", "scope-creep", "suggestions")


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
    assert "Readiness: c1: preemption should not be the main tool" in text
    assert len(page.sections["net-benefit"]["tables"]["scorecard"]) == 1 + 4


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
