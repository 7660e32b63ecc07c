"""The weekly report: ISO weeks, the CLI, the HTML parsed section by section, the Markdown, and offline rendering."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import fixture_cluster as fc
import polars as pl
import pytest
from browser import Chromium

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.cli import main
from preemptlens.config import load_config
from preemptlens.dashboards.report import ReportError, Week
from preemptlens.warehouse import Warehouse

SECTIONS = (
    "answer", "net-benefit", "worst-preemptions", "preemption-hazard", "top-hoarders", "loss-coverage", "goodput",
    "scope-creep",
    "suggestions",
)


class Page(HTMLParser):
    """Sections by id with their heading, tables (rows of cell texts) and chart images (their alt text); every
    script tag and every address the page would load."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.scripts: list[dict[str, str | None]] = []
        self.loads: list[str] = []
        self._section: dict | None = None
        self._tag: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self._tag.append(tag)
        self.loads += [str(a[k]) for k in ("src", "href") if a.get(k)]
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
            elif tag == "img" and str(a.get("src")).startswith("data:image/png;base64,"):
                self._section["figures"].append(a["alt"])

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


def test_a_pilot_naming_no_cluster_is_of_the_warehouse_s_only_cluster(
    cluster_warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "preemptlens.toml"
    config.write_text('[pilot.pilots.trial]\npools = ["a100"]\ncontrol = ["h100"]\nstart = "2026-11-16T00:00:00Z"\n'
                      'what = "preemption on in a100"\n')
    argv = ["--config", str(config), "--warehouse", str(cluster_warehouse)]
    assert main([*argv, "pilot", "trial"]) == 0
    assert "pilot trial on cluster c1: preemption on in a100" in capsys.readouterr().out
    assert main([*argv, "report", "--week", "2026-W48", "--out", str(tmp_path)]) == 0
    markdown = (tmp_path / "preemptlens-2026-W48.md").read_text()
    assert "**Pilot trial** (preemption on in a100; c1: a100 against h100" in markdown
    assert "has no jobs" not in markdown


def test_html_needs_no_script_and_loads_nothing(page: Page, written: Path) -> None:
    """A mail client runs no script and fetches nothing: the charts are PNG images inside the file."""
    assert page.scripts == [] and all(src.startswith("data:image/png;base64,") for src in page.loads)
    html = (written / "preemptlens-2026-W48.html").read_text()
    assert "plotly" not in html.lower() and len(html) < 1_500_000
    # Commands and settings in the sentences read as code, not as Markdown's backticks.
    assert "`" not in html and "<code>preemptlens collect checkpoints</code>" in html


def test_every_section_is_there(page: Page) -> None:
    assert list(page.sections) == list(SECTIONS)
    for name in SECTIONS[1:]:
        assert page.sections[name]["h2"], name
    assert page.sections["net-benefit"]["figures"] == ["Net benefit per day, 2026-W48"]
    assert page.sections["worst-preemptions"]["figures"] == ["Worst preemptions of 2026-W48"]
    assert page.sections["preemption-hazard"]["figures"] == ["Preemption risk by run age"]
    assert page.sections["top-hoarders"]["figures"] == ["Idle GPU-hours by team, 2026-W48",
                                                        "Idle GPU-hours per day, 2026-W48"]
    assert page.sections["scope-creep"]["figures"] == ["Tier shares of GPU-hours per week",
                                                       "Critical + high share per team"]


def test_the_answer_comes_first(page: Page) -> None:
    text = " ".join(page.sections["answer"]["text"].split())
    assert text.startswith("Does preemption pay? Verdict: c1: preemption should not be the main tool")
    # the counterfactual's headline and net as sentences, then the first fix, as the dashboard shows them
    headline, net, fix = (text.index(s) for s in ("Against plain queueing, preemption saved",
                                                  "Net at the configured tier weights", "Fix first:"))
    assert headline < net < fix
    # W48 from the ledger: the two critical preemptors each saved 8 GPU-h of waiting; victims waited 12 + 8 + 8 and
    # lost 20 + 8 + 4.
    cards = dict(re.findall(r"(Wait saved|Victims' wait|Net wait saved|Work thrown away|Weighted net), GPU-h "
                            r"([-+\d,.]+)", text))
    assert cards == {"Wait saved": "16", "Victims' wait": "28", "Net wait saved": "-12",
                     "Work thrown away": "32", "Weighted net": "+18"}


def test_net_benefit_section(page: Page) -> None:
    text = " ".join(page.sections["net-benefit"]["text"].split())
    assert f"Preemptions {fc.PREEMPTIONS_W48}" in text
    assert "Median requeue delay 60 min over 3 victims that restarted" in text
    header, *rows = page.sections["net-benefit"]["tables"]["scorecard"]
    assert header == ["cluster", "question", "answer", "evidence"] and len(rows) == 4
    assert rows[2][3].startswith("preemptible GPU-hours with checkpoint data ")
    # gains: two critical preemptors x 8 GPU-h x weight 4; costs: 1 x (20 + 12) + 0.5 x (8 + 8) + 0.5 x (4 + 8)
    teams = {r[0]: r for r in page.sections["net-benefit"]["tables"]["team-net"][1:]}
    assert teams["total"][1:] == ["3", "16.0 GPU-h", "32.0 GPU-h", "28.0 GPU-h", "18.0"]
    assert teams["nlp"][1:] == ["1", "0.0 GPU-h", "20.0 GPU-h", "12.0 GPU-h", "-32.0"]


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
    assert worst["work thrown away"] == "20.0 GPU-h (lost progress 20.0 GPU-h, the whole run: no checkpoint known)"
    assert worst["waiting"] == "12.0 GPU-h (4 GPUs × 3.0 h)"
    assert [dict(zip(header, r, strict=True))["avoidable"] for r in rows] == ["no", "yes", "yes"]


def test_top_hoarders_section(page: Page) -> None:
    teams = page.sections["top-hoarders"]["tables"]["hoarders-teams"]
    assert teams[1][:3] == [fc.HOARDER_TEAM, f"{fc.HOARDED_GPU_HOURS:.1f} GPU-h", "4.0 h"]
    jobs = page.sections["top-hoarders"]["tables"]["hoarders-jobs"]
    assert jobs[1][0] == fc.HOARDER_JOB and jobs[1][2] == f"{fc.HOARDED_GPU_HOURS:.1f} GPU-h"


def test_loss_coverage_and_goodput_sections(page: Page, written: Path) -> None:
    text = " ".join(page.sections["loss-coverage"]["text"].split())
    # W48: train-w2 and train-48b lost 4 and 8 GPU-hours since their checkpoints; finetune-48 wrote none: 20 assumed
    assert ("Lost progress is measured for 67% of 3 preemptions (2 from the victims' checkpoints, 0 from the step "
            "they restarted from) and 38% of their 32.0 lost GPU-hours; 0 rest on a declared checkpoint interval "
            "and 1 assume everything since the run started.") in text
    header, *rows = page.sections["loss-coverage"]["tables"]["coverage-teams"]
    by_team = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert by_team["vision"]["loss measured"] == "100% (2)" and by_team["vision"]["lost, GPU-h"] == "12.0"
    assert by_team["nlp"]["loss measured"] == "0% (0)" and by_team["nlp"]["declared / assumed"] == "0 / 1"
    # no save times and no progress reports: goodput is an interval, and says why, never one number
    good = " ".join(page.sections["goodput"]["text"].split())
    assert "Goodput between " in good and "so the measured parts bound it" in good
    assert "checkpoints without a save time" in good and "restarts without a measured warm-up" in good
    header, *rows = page.sections["goodput"]["tables"]["goodput-teams"]
    infer = dict(zip(header, next(r for r in rows if r[0] == "infer"), strict=True))
    # infer's work neither failed, restarted nor checkpointed, and held no GPU idle: all of it advanced its jobs
    assert infer["goodput"] == "100%" and infer["idle, GPU-h"] == "0.0"
    nlp = dict(zip(header, next(r for r in rows if r[0] == "nlp"), strict=True))
    # at most its 260 allocated GPU-hours less the 32 idle: 228 (88%); at least that less the most its unmeasured
    # parts can be: finetune-48's whole first run (20 GPU-hours, its loss assumed) and its whole restart (4 GPUs x
    # 3 h, its warm-up not measured), 196 (75%)
    assert nlp["goodput"] == "between 75% and 88%" and nlp["idle, GPU-h"] == "32.0"
    md = (written / "preemptlens-2026-W48.md").read_text()
    assert "**Loss coverage:** Lost progress is measured for 67% of 3 preemptions" in md
    assert "**Goodput:** Goodput between " in md


def test_scope_creep_and_suggestions_sections(page: Page) -> None:
    header, *rows = page.sections["scope-creep"]["tables"]["scope-teams"]
    assert header == ["team", "this week", "week before", "change"]
    assert rows[0][0] == fc.SCOPE_TEAM and rows[0][1] == "100%" and rows[0][3].startswith("+")
    assert "No suggestions" in page.sections["suggestions"]["text"]


def test_markdown_summary(written: Path) -> None:
    text = (written / "preemptlens-2026-W48.md").read_text()
    assert text.startswith("**Preemption weekly report 2026-W48** (2026-11-23 to 2026-11-29 UTC")
    assert "\n\n**Verdict:** c1: preemption should not be the main tool (" in text
    assert ("**Net, in two currencies:** waiting: wait saved 16 GPU-h, victims' wait 28 GPU-h, net wait saved "
            "-12 GPU-h; work thrown away 32 GPU-h") in text
    assert "weighted net +18 (both added" in text
    worst_row = next(line for line in text.splitlines() if line.startswith(f"| {fc.WORST_W48} "))
    assert ("| 20.0 GPU-h (lost progress 20.0 GPU-h, the whole run: no checkpoint known) "
            "| 12.0 GPU-h (4 GPUs × 3.0 h) |") in worst_row
    assert f"| {fc.HOARDER_TEAM} | 32.0 GPU-h |" in text
    assert "<" not in text


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells, their Markdown escapes undone."""
    return [re.sub(r"\\(.)", r"\1", c).strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_markdown_holds_every_table_of_the_html_whole(page: Page, written: Path) -> None:
    """Chat readers get every row the mail readers get: no team dropped from a table without a word."""
    md_rows = [_cells(line) for line in (written / "preemptlens-2026-W48.md").read_text().splitlines()
               if line.startswith("|") and not line.startswith("|---")]
    # the cards (net-cards, and the unnamed row of headline figures) lay out figures the summary writes as sentences
    tables = {name: rows for section in page.sections.values() for name, rows in section["tables"].items()
              if rows and name not in ("net-cards", "None")}
    assert {"team-net", "scorecard", "worst-table", "hazard-table", "hoarders-teams", "hoarders-jobs",
            "coverage-teams", "goodput-teams", "scope-teams"} <= set(tables)
    for name, rows in tables.items():
        for row in rows:
            assert [" ".join(c.split()) for c in row] in md_rows, (name, row)


def test_markdown_says_who_the_median_requeue_delay_leaves_out(cluster_warehouse: Path, tmp_path: Path) -> None:
    """Victims that never restarted have no requeue delay: the median is over the others, and the summary says so."""
    path = tmp_path / "w.duckdb"
    shutil.copy(cluster_warehouse, path)
    with Warehouse(path) as wh:
        # finetune-48's second run never happened: its victim is still waiting at the end of the data.
        wh.con.execute("DELETE FROM job_runs WHERE job_id = $j AND run = 2", {"j": fc.WORST_W48})
        analyze(wh, load_config(None).of(AnalyticsSettings))
    assert main(["--warehouse", str(path), "report", "--week", "2026-W48", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "preemptlens-2026-W48.md").read_text()
    assert ("median requeue delay 60 min over the 2 victims that restarted (1 victim that had not restarted by the "
            "end of the data are left out)") in text


def test_a_week_without_data_says_so(
    cluster_warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--warehouse", str(cluster_warehouse), "report", "--week", "2026-W50", "--out", str(tmp_path)]) == 0
    assert "weekly report 2026-W50: no data in the warehouse for this week" in capsys.readouterr().out
    html = (tmp_path / "preemptlens-2026-W50.html").read_text()
    md = (tmp_path / "preemptlens-2026-W50.md").read_text()
    for text in (html.split("<body>")[1], md):
        assert "No data for 2026-W50" in text and "runs from 2026-11-09 to 2026-11-29 (2026-W46 to 2026-W48)" in text
        assert "Readiness" not in text and "verdict" not in text.lower().replace("no verdict", "")


def test_charts_are_drawn_on_a_host_without_a_browser(cluster_warehouse: Path, tmp_path: Path) -> None:
    """No Chrome or Chromium on PATH (a server after `pip install`): every chart is still an image."""
    browsers = ("chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell")
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if not any((Path(d) / b).exists() for b in browsers))
    env = {**os.environ, "PATH": path}
    env.pop("BROWSER_PATH", None)
    assert all(shutil.which(b, path=path) is None for b in browsers)
    subprocess.run([sys.executable, "-m", "preemptlens.cli", "--warehouse", str(cluster_warehouse), "report",
                    "--week", "2026-W48", "--out", str(tmp_path)], env=env, check=True, capture_output=True,
                   timeout=600)
    parsed = Page()
    parsed.feed((tmp_path / "preemptlens-2026-W48.html").read_text())
    drawn = [alt for section in parsed.sections.values() for alt in section["figures"]]
    assert len(drawn) == 7 and "Charts left out" not in parsed.sections["answer"]["text"]
    png = next(src for src in parsed.loads if src.startswith("data:image/png;base64,"))
    header = base64.b64decode(png.split(",", 1)[1])[:24]
    # PNG's IHDR: the width at twice the report's 960 CSS pixels, for sharp text on dense screens
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(header[16:20], "big") == 2 * 960


def test_a_chart_the_renderer_cannot_draw_is_named_in_the_report() -> None:
    import plotly.graph_objects as go

    from preemptlens.dashboards.report import _render_images

    pie = go.Figure(go.Pie(values=[1, 2]), layout={"title": {"text": "Shares &amp; more"}})
    bars = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]), layout={"title": {"text": "Bars"}})
    drawn, missing = _render_images({"pie": pie, "bars": bars})
    assert list(drawn) == ["bars"] and drawn["bars"].startswith(b"\x89PNG")
    assert missing == ["Shares & more: a pie trace, which the report's renderer does not draw"]


# A cell's words each on one line: a word broken over two lines ("clus / ter") has two boxes. A line may
# end at a hyphen ("GPU- / h", "2026-11- / 25"), as text does; the parts between hyphens stay whole.
BROKEN_WORDS_JS = """
(() => {
  const broken = [];
  for (const cell of document.querySelectorAll('th, td')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[^\\s-]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return JSON.stringify(broken);
})()
"""


def test_html_reads_without_scripts_in_chromium(written: Path, screenshots: Path) -> None:
    """As a mail client shows it: scripts off, in a narrow reading pane; every chart image drawn, no word of a
    table cell broken over two lines."""
    with Chromium(width=760, height=900) as browser:
        browser.call("Emulation.setScriptExecutionDisabled", {"value": True})
        browser.navigate((written / "preemptlens-2026-W48.html").as_uri())
        deadline = time.monotonic() + 30
        images: list[int] = []
        while time.monotonic() < deadline:
            browser.call("Emulation.setScriptExecutionDisabled", {"value": False})
            images = browser.call("Runtime.evaluate", {
                "expression": "document.readyState !== 'complete' ? [] : "
                "Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)",
                "returnByValue": True,
            })["result"]["value"]
            browser.call("Emulation.setScriptExecutionDisabled", {"value": True})
            if images and all(images):
                break
            time.sleep(0.2)
        assert len(images) == 7 and all(w >= 960 for w in images), images
        broken = browser.call("Runtime.evaluate", {"expression": BROKEN_WORDS_JS, "returnByValue": True})
        assert json.loads(broken["result"]["value"]) == []
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
    assert "<strong>Change:</strong> minimum run time: 0 s → 30 min" in second
    assert "effect of Let runs finish 30 min before preemption (saving 50.0 GPU-h of lost progress)" in second
    assert "evidence of Let runs finish 30 min before preemption" in second
    # advice that saves nothing says nothing of lost progress: not "saving 0.0 GPU-h", not "not measured"
    assert "lost progress" not in items[0] and "Expected effect:</strong> effect of Do not rely" in items[0]
    # the cluster's own scheduler's snippet in the open, the other schedulers' behind a disclosure, no JSON anywhere
    own, disclosed = second.split("<details>")
    assert "For slurm:" in own and "PreemptExemptTime" in own and "ClusterQueue" not in own
    assert "<summary>" in disclosed and "ClusterQueue" in disclosed and "PreemptExemptTime" not in disclosed
    assert '{"' not in section and "&#34;slurm&#34;" not in section


def test_suggestions_in_markdown_read_as_a_numbered_list(suggested: Path) -> None:
    text = (suggested / "preemptlens-2026-W48.md").read_text()
    section = text[text.index("**Top suggestions**"):]
    numbered = [line for line in section.splitlines() if re.match(r"^\d+\. ", line)]
    assert numbered == [
        "1. **Do not rely on preemption yet** (c1): preemption as a main tool",
        "2. **Let runs finish 30 min before preemption** (c1): minimum run time, 0 s → 30 min",
        "3. **Give victims time to checkpoint — a100/nlp** (c1): grace time, 60 s → 5 min",
    ]
    assert ("   Expected effect: effect of Give victims time to checkpoint (saving 200 GPU-h of lost progress)"
            in section)
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


def test_stacked_shares_with_a_tier_missing_some_weeks_are_drawn() -> None:
    """A tier with no GPU-hours in a week has no row for it: its area is 0 there, as plotly stacks it, and the
    chart is drawn (a 1,024-GPU simulated cluster's report stopped with an internal error here)."""
    from preemptlens.dashboards import figures, images

    weeks = [datetime(2026, 11, d, tzinfo=UTC) for d in (2, 9, 16)]
    shares = pl.DataFrame({"week": [*weeks, weeks[1]], "tier": ["low", "low", "low", "high"],
                           "gpu_hour_share": [1.0, 0.75, 1.0, 0.25]})
    fig = figures.tier_shares(shares)
    areas = [(list(t.x), list(t.y), t.name, t.line.color) for t in fig.data]
    xs, ys = images.stacked(areas)
    assert xs == weeks
    assert dict(zip([a[2] for a in areas], ys, strict=True)) == {"high": [0.0, 0.25, 0.0], "low": [1.0, 0.75, 1.0]}
    assert images.png(fig, 960).startswith(b"\x89PNG")
