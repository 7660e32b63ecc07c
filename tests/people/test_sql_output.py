"""What `preemptlens sql` writes is only the answer: no progress bar on a terminal, and CSV a spreadsheet opens
as data (a text cell starting with =, +, - or @ is not a formula)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.people.people_seed import jobs_warehouse

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jobs_warehouse(tmp_path_factory.mktemp("output"))


def sql(warehouse: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "preemptlens.cli", "--warehouse", str(warehouse), "sql", *argv],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PREEMPTLENS_CONFIG": ""})


def test_csv_cells_that_would_be_formulas_are_text(warehouse: Path) -> None:
    done = sql(warehouse, "--format", "csv",
               "SELECT '=HYPERLINK(\"http://evil\")' AS a, '+1' AS b, '-2+3' AS c, '@SUM(A1)' AS d, "
               "-5 AS n, 2.5 AS x, 'plain' AS e, '=' AS \"=col\"")
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header == "a,b,c,d,n,x,e,'=col"
    assert row == "\"'=HYPERLINK(\"\"http://evil\"\")\",'+1,'-2+3,'@SUM(A1),-5,2.5,plain,'="


def test_no_progress_bar_on_a_terminal(warehouse: Path) -> None:
    # Several seconds of md5: DuckDB draws its progress bar on a terminal after two.
    query = "SELECT count(*) AS n FROM range(40000000) t(x) WHERE md5(CAST(x AS VARCHAR)) LIKE 'aa%'"
    main, child = pty.openpty()
    began = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "preemptlens.cli", "--warehouse", str(warehouse), "sql", "--format", "csv", query],
        stdout=child, stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PREEMPTLENS_CONFIG": ""})
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    process.wait(timeout=120)
    took = time.monotonic() - began
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    assert out.decode().replace("\r\n", "\n").splitlines()[0] == "n", out[:200]
    assert b"%" not in out and b"\xe2\x96" not in out, out[:200]
    assert took > 2.5, f"the query took {took:.1f} s: too fast to have drawn a progress bar at all"
