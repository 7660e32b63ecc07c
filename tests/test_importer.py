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


def quarantine_of(wh_path: Path) -> dict[str, tuple[str, str, str]]:
    with Warehouse(wh_path) as wh:
        rows = wh.query("SELECT record, field, reason, raw FROM quarantine").iter_rows()
        return {Path(r).name: (f, why, raw) for r, f, why, raw in rows}


def test_hostile_values_are_quarantined_and_the_rest_of_the_file_loads(tmp_path: Path) -> None:
    """The values that lost whole files (1e20, "nan", bad UTF-8, a 200 KiB CSV field) or slipped in
    (NaN, inf, year 2999, a 10 MB id, NUL): each costs its own line only."""
    good = {"cluster": "c1", "tier": "low", "preemptible": True, "gpus": 1, "submit_time": "2026-11-02T08:00:00Z"}
    lines = [
        json.dumps({**good, "job_id": "ok1"}),
        json.dumps({**good, "job_id": "e20", "submit_time": 1e20}),
        json.dumps({**good, "job_id": "nan-time", "submit_time": "nan"}),
        json.dumps({**good, "job_id": "nan-work", "work_s": float("nan")}),
        json.dumps({**good, "job_id": "inf-ckpt", "checkpoint_interval_s": float("inf")}),
        json.dumps({**good, "job_id": "big-prio", "priority_value": "1e400"}),
        json.dumps({**good, "job_id": "y2999", "submit_time": "2999-01-01T00:00:00Z"}),
        json.dumps({**good, "job_id": "x" * 10_000_00}),
        json.dumps({**good, "job_id": "nul\u0000id"}),
        json.dumps({**good, "job_id": "tabname", "name": "a\tb"}),
        json.dumps({**good, "job_id": "deep"})[:-1] + ', "team": ' + "[" * 100_000 + "]" * 100_000 + "}",
        json.dumps({**good, "job_id": "ok2", "submit_time": 1793606400}),
    ]
    data = ("\n".join(lines[:3]) + "\n").encode() + b'{"cluster": "c1", "job_id": "bad\xff\xfeutf8"}\n'
    data += ("\n".join(lines[3:]) + "\n").encode()
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(data)
    wh_path = tmp_path / "w.duckdb"
    run_import(wh_path, path)
    with Warehouse(wh_path) as wh:
        assert sorted(wh.query("SELECT job_id FROM jobs")["job_id"]) == ["ok1", "ok2"]
        assert wh.query("SELECT work_s FROM jobs WHERE job_id = 'ok2'")["work_s"].to_list() == [None]
    q = quarantine_of(wh_path)
    unreadable_time = "submit_time cannot be read as TIMESTAMP WITH TIME ZONE (got '1e+20')"
    assert q["jobs.jsonl:2"][:2] == ("submit_time", unreadable_time)
    assert q["jobs.jsonl:3"][0] == "submit_time" and "cannot be read" in q["jobs.jsonl:3"][1]
    assert q["jobs.jsonl:4"][:2] == ("(line)", "not valid UTF-8 (byte 0xff at offset 32)")
    assert "bad\\xff\\xfeutf8" in q["jobs.jsonl:4"][2]
    assert q["jobs.jsonl:5"][:2] == ("work_s", "work_s must be a finite number (got 'nan')")
    assert q["jobs.jsonl:6"][0] == "checkpoint_interval_s" and "finite" in q["jobs.jsonl:6"][1]
    assert q["jobs.jsonl:7"][0] == "priority_value" and "finite" in q["jobs.jsonl:7"][1]
    assert q["jobs.jsonl:8"][0] == "submit_time" and "warehouse.future_slack_s" in q["jobs.jsonl:8"][1]
    assert q["jobs.jsonl:9"][0] == "job_id" and "longer than 256 characters" in q["jobs.jsonl:9"][1]
    assert len(q["jobs.jsonl:9"][2]) < 2_000, "quarantine keeps a readable piece of a huge value"
    assert q["jobs.jsonl:10"][0] == "job_id" and "control character" in q["jobs.jsonl:10"][1]
    assert "\\x00" in q["jobs.jsonl:10"][2]
    assert q["jobs.jsonl:11"][0] == "name" and "control character" in q["jobs.jsonl:11"][1]
    assert q["jobs.jsonl:12"][:2] == ("(line)", "not valid JSON: nested too deeply")
    assert len(q) == 11


def test_a_csv_field_over_128_kib_costs_its_record_only(tmp_path: Path) -> None:
    header = "cluster,job_id,tier,preemptible,gpus,submit_time,name\n"
    row = "c1,{id},low,true,1,2026-11-02T08:00:00Z,{name}\n"
    path = tmp_path / "jobs.csv"
    path.write_bytes(
        (header + row.format(id="a", name="x") + row.format(id="b", name="y" * 200_000)).encode()
        + b"c1,c\xff,low,true,1,2026-11-02T08:00:00Z,z\n"
        + ('c1,d,low,true,1,2026-11-02T08:00:00Z,"two\nlines"\n' + row.format(id="e", name="ok")).encode()
    )
    wh_path = tmp_path / "w.duckdb"
    run_import(wh_path, path)
    with Warehouse(wh_path) as wh:
        assert sorted(wh.query("SELECT job_id FROM jobs")["job_id"]) == ["a", "e"]
    q = quarantine_of(wh_path)
    assert q["jobs.csv:3"][:2] == ("(line)", "not valid CSV: field larger than field limit (131072)")
    assert q["jobs.csv:4"][:2] == ("(line)", "not valid UTF-8 (byte 0xff at offset 4)")
    # A quoted newline inside an id's record: the name holds a control character; located by its last line.
    assert q["jobs.csv:6"][0] == "name"
    assert len(q) == 3


def test_a_byte_that_is_not_utf8_inside_a_quoted_field_costs_that_record_once(tmp_path: Path) -> None:
    """A quoted field spanning two lines, the second not UTF-8: one reject for the record (not one for the
    line and another for a quote left open), and the records after it still load."""
    header = "cluster,job_id,tier,preemptible,gpus,submit_time,name\n"
    path = tmp_path / "jobs.csv"
    path.write_bytes(
        (header + 'c1,a,low,true,1,2026-11-02T08:00:00Z,"first\n').encode() + b'half \xff"\n'
        + b"c1,b,low,true,1,2026-11-02T08:00:00Z,ok\n"
    )
    wh_path = tmp_path / "w.duckdb"
    run_import(wh_path, path)
    with Warehouse(wh_path) as wh:
        assert wh.query("SELECT job_id FROM jobs")["job_id"].to_list() == ["b"]
    q = quarantine_of(wh_path)
    assert q == {"jobs.csv:3": ("(line)", "not valid UTF-8 (byte 0xff at offset 5)", "half \\xff\"")}


def test_a_file_that_cannot_be_read_does_not_stop_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh_path = tmp_path / "w.duckdb"
    missing = tmp_path / "jobs-missing.jsonl"
    assert main(["--warehouse", str(wh_path), "import", str(missing), str(CASES / "jobs.jsonl")]) == 2
    assert "jobs-missing.jsonl: cannot open" in capsys.readouterr().err
    with Warehouse(wh_path) as wh:
        assert wh.query("SELECT count(*) AS n FROM jobs")["n"][0] == 3


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_line_over_1_mib_is_quarantined_with_its_first_200_bytes(tmp_path: Path, suffix: str) -> None:
    """docs/import-format.md: a line longer than 1 MiB is quarantined, its first 200 bytes kept; the rest loads."""
    path = tmp_path / f"jobs{suffix}"
    head = '{"cluster": "c1", "job_id": "huge", "name": "' if suffix == ".jsonl" else 'c1,huge,"'
    good = ('{"cluster": "c1", "job_id": "small", "tier": "low", "preemptible": true, "gpus": 1, '
            '"submit_time": "2026-11-02T10:00:00Z"}') if suffix == ".jsonl" else \
        "c1,small,x,low,true,1,2026-11-02T10:00:00Z"
    lines = [head + "x" * (2 << 20) + ('"}' if suffix == ".jsonl" else '",low,true,1,2026-11-02T10:00:00Z'), good]
    if suffix == ".csv":
        lines.insert(0, "cluster,job_id,name,tier,preemptible,gpus,submit_time")
    path.write_text("\n".join(lines) + "\n")
    run_import(tmp_path / "w.duckdb", path)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        assert wh.query("SELECT job_id FROM jobs")["job_id"].to_list() == ["small"]
        (record, reason, raw), = wh.query("SELECT record, reason, raw FROM quarantine").rows()
    assert record.endswith(f"jobs{suffix}:{1 if suffix == '.jsonl' else 2}") and "longer than 1,048,576" in reason
    assert raw.startswith(head) and raw.endswith("...") and len(raw) == 203
