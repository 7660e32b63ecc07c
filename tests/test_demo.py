"""`preemptlens demo` runs the whole chain on a fresh directory and is idempotent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_demo(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "preemptlens.cli", "demo", "--days", "7", "--gpus", "32"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
    )


def test_demo_chain_on_a_fresh_directory(tmp_path: Path) -> None:
    first = run_demo(tmp_path)
    out = first.stdout
    assert "== analyze" in out and "readiness scorecard for cluster demo" in out
    assert "== suggest" in out and "== weekly report" in out
    assert "verdict" in out
    assert "open the dashboard with: preemptlens --warehouse preemptlens.duckdb dashboard" in out
    reports = sorted(p.suffix for p in (tmp_path / "reports").iterdir())
    assert reports == [".html", ".md"]
    assert (tmp_path / "preemptlens.duckdb").exists() and (tmp_path / "preemptlens.duckdb.snapshot").exists()
    # Same week, same seed: the second run loads nothing new.
    second = run_demo(tmp_path)
    assert "rows loaded 0," in second.stdout
