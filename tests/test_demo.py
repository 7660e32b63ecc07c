"""`preemptlens demo` runs the whole chain on a fresh directory and is idempotent."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent


def run_demo(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "preemptlens.cli", "demo", "--days", "7", "--gpus", "32"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        # the README's first command runs with every default (tests/conftest.py turns the jittered replays off)
        env={**{k: v for k, v in os.environ.items() if k != "PREEMPTLENS_TUNING__JITTER_REPLAYS"},
             "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
    )


def test_demo_chain_on_a_fresh_directory(tmp_path: Path) -> None:
    first = run_demo(tmp_path)
    out = first.stdout
    # the answer first: the counterfactual headline and the verdict, before the suggestions and the report
    assert out.startswith("== does preemption pay?\ndoes preemption pay on cluster demo?\n  against plain queueing")
    assert "readiness scorecard:" in out
    assert out.index("== does preemption pay?") < out.index("== suggest") < out.index("== weekly report")
    assert "open the dashboard with: preemptlens --warehouse preemptlens.duckdb dashboard" in out
    reports = sorted(p.suffix for p in (tmp_path / "reports").iterdir())
    assert reports == [".html", ".md"]
    assert (tmp_path / "preemptlens.duckdb").exists() and (tmp_path / "preemptlens.duckdb.snapshot").exists()
    assert_verdict_reads_the_same(tmp_path, out)
    # Same week, same seed: the second run loads nothing new.
    second = run_demo(tmp_path)
    assert "rows loaded 0," in second.stdout


def assert_verdict_reads_the_same(folder: Path, cli_out: str) -> None:
    """The CLI, the weekly report (Markdown and HTML) and the dashboard's overview word the verdict alike."""
    (cli,) = re.findall(r"^  verdict: (.+)$", cli_out, flags=re.MULTILINE)
    (md_file,) = (folder / "reports").glob("*.md")
    (md,) = re.findall(r"^\*\*Verdict:\*\* demo: (.+)$", md_file.read_text(), flags=re.MULTILINE)
    (html_file,) = (folder / "reports").glob("*.html")
    (page,) = re.findall(r'<div class="verdict">Verdict: demo: (.+?)</div>', html_file.read_text())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(folder / "preemptlens.duckdb"))
        mp.delenv("PREEMPTLENS_CONFIG", raising=False)
        app = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=120)
        app.run()
    assert not app.exception, app.exception
    shown = [a.value for kind in (app.success, app.info, app.warning, app.error) for a in kind
             if a.value.startswith("demo: ")]
    assert shown == [f"demo: {cli}"]
    # the Markdown escapes what Markdown would read as markup ([ ] of an interval): it renders as the CLI's words
    assert re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>])", r"\1", md) == cli and html.unescape(page) == cli
    # the verdict counts answers three ways and names each unanswered question
    assert re.search(r"\(\d yes, \d no, \d unknown of 4\)", cli)
