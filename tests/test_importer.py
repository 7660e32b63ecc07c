"""`preemptlens import`: JSONL and CSV files, bad lines quarantined by line number."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

CASES = Path(__file__).parent / "cases" / "import"


def run_import(warehouse: Path, *files: Path) -> None:
    assert main(["--warehouse", str(warehouse), "import", *map(str, files)]) == 0


def snapshot(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with Warehouse(path) as wh:
        return {
            t: wh.query(f"SELECT * EXCLUDE (_load_id) FROM {t} ORDER BY ALL").rows()
            for t in ("jobs", "job_runs", "checkpoints", "gpu_samples", "quarantine")
        }


def test_import_loads_good_lines_and_quarantines_bad_ones(tmp_path: Path) -> None:
    wh_path = tmp_path / "w.duckdb"
    run_import(wh_path, CASES / "jobs.jsonl", CASES / "job_runs.csv", CASES / "checkpoints.jsonl")
    with Warehouse(wh_path) as wh:
        assert wh.query("SELECT job_id FROM jobs ORDER BY job_id")["job_id"].to_list() == ["100", "101", "102"]
        assert wh.query("SELECT count(*) AS n FROM job_runs")["n"][0] == 4
        assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == 3
        q = {
            Path(r).name: (f, why) for r, f, why in wh.query("SELECT record, field, reason FROM quarantine").iter_rows()
        }
    assert q["jobs.jsonl:3"] == ("(line)", "not valid JSON: Expecting value")
    assert q["jobs.jsonl:4"][0] == "tier" and "urgent" in q["jobs.jsonl:4"][1]
    assert q["jobs.jsonl:5"] == ("colour", "colour is not a column of jobs")
    assert q["jobs.jsonl:6"] == ("(line)", "expected a JSON object, got list")
    assert q["job_runs.csv:6"][0] == "end_time" and "before start_time" in q["job_runs.csv:6"][1]
    assert q["job_runs.csv:7"] == ("(line)", "more fields than the header has")
    assert q["checkpoints.jsonl:3"][0] == "kind"
    assert len(q) == 7


def test_reimport_is_a_no_op(tmp_path: Path) -> None:
    wh_path = tmp_path / "w.duckdb"
    files = (CASES / "jobs.jsonl", CASES / "job_runs.csv", CASES / "checkpoints.jsonl")
    run_import(wh_path, *files)
    before = snapshot(wh_path)
    run_import(wh_path, *files)
    assert snapshot(wh_path) == before


def test_unknown_table_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = tmp_path / "stuff.jsonl"
    odd.write_text(json.dumps({"a": 1}) + "\n")
    assert main(["--warehouse", str(tmp_path / "w.duckdb"), "import", str(odd)]) == 2
    err = capsys.readouterr().err
    assert "stuff.jsonl" in err and "--table" in err


def test_explicit_table_and_large_file_in_chunks(tmp_path: Path) -> None:
    samples = tmp_path / "export.jsonl"
    with samples.open("w") as fh:
        for minute in range(300):
            for gpu in range(8):
                fh.write(
                    json.dumps(
                        {
                            "cluster": "c1",
                            "host": "n1",
                            "gpu_uuid": f"GPU-{gpu}",
                            "gpu_index": gpu,
                            "time": 1793606400 + 60 * minute,
                            "busy": 0.5,
                        }
                    )
                    + "\n"
                )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "preemptlens.cli",
            "--warehouse",
            str(tmp_path / "w.duckdb"),
            "import",
            "--table",
            "gpu_samples",
            str(samples),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "2400 loaded, 0 unchanged, 0 quarantined" in out.stdout
