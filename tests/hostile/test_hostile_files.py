"""The JSONL/CSV importer against hostile values in every column type: no exception escapes the
importer or the load API, every line is loaded or quarantined (never both, never neither), and
what was loaded before stays loaded, once."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hostile_values import HOSTILE, text, value_for
from hypothesis import given
from hypothesis import strategies as st

from preemptlens.collectors.files import FileImporter
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.hostile

# jobs and gpu_samples between them hold every column type of the contract.
TABLES = ("jobs", "gpu_samples")
GOOD = {
    "jobs": {"cluster": "c1", "tier": "low", "preemptible": True, "gpus": 1, "submit_time": "2026-11-02T08:00:00Z"},
    "gpu_samples": {"cluster": "c1", "host": "n1", "time": 1_793_606_400, "busy": 0.5},
}
# The column made unique per line, so that no two lines share a natural key (a later line with
# the same key replaces an earlier one by design, which would blur the count).
UNIQUE = {"jobs": "job_id", "gpu_samples": "gpu_uuid"}
BASELINE = 50


@pytest.fixture(scope="module")
def warehouse() -> Iterator[Warehouse]:
    with Warehouse(":memory:") as wh:
        t0 = datetime(2026, 11, 2, tzinfo=UTC)
        wh.load("jobs", pl.DataFrame({"cluster": ["baseline"] * BASELINE, "job_id": [str(i) for i in range(BASELINE)],
                                      "tier": ["low"] * BASELINE, "preemptible": [True] * BASELINE,
                                      "gpus": [1] * BASELINE, "submit_time": [t0] * BASELINE}), "baseline")
        yield wh


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@st.composite
def lines(draw: st.DrawFn, table: str, types: dict[str, str]) -> list[dict[str, object] | bytes]:
    """Up to 8 lines: rows with hostile values in some columns, or raw bytes that are no row at all."""
    out: list[dict[str, object] | bytes] = []
    for i in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 9)) == 0:
            # Garbage: not UTF-8, not JSON, a quote-free line so a CSV record stays one line.
            raw = draw(st.binary(min_size=1, max_size=40)).replace(b"\n", b" ").replace(b"\r", b" ")
            out.append(raw.replace(b'"', b"'") + b"x")
            continue
        row: dict[str, object] = dict(GOOD[table])
        for column in draw(st.lists(st.sampled_from(sorted(types)), max_size=4, unique=True)):
            row[column] = draw(value_for(types[column]))
        if draw(st.integers(0, 19)) == 0:
            row[draw(text)] = 1  # a column the table does not have (or one it does, under a hostile name)
        unique = UNIQUE[table]
        row[unique] = f"{row.get(unique) if isinstance(row.get(unique), str) else ''}#{i}"
        if row.get("cluster") == "baseline":
            row["cluster"] = "c1"
        out.append(row)
    return out


def write(path: Path, rows: list[dict[str, object] | bytes], columns: list[str]) -> None:
    # Every CSV field quoted: a bare carriage return in an unquoted field is two records, not one.
    if path.suffix == ".jsonl":
        with path.open("wb") as handle:
            for row in rows:
                handle.write(row if isinstance(row, bytes) else json.dumps(row).encode())
                handle.write(b"\n")
        return
    names = sorted({k for r in rows if isinstance(r, dict) for k in r} | set(columns))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(names)
    data = [buffer.getvalue().encode("utf-8", "surrogatepass")]
    for row in rows:
        if isinstance(row, bytes):
            data.append(row + b"\n")
            continue
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
        writer.writerow(["" if row.get(n) is None else row[n] if isinstance(row[n], str) else json.dumps(row[n])
                         for n in names])
        data.append(buffer.getvalue().encode("utf-8", "surrogatepass"))
    path.write_bytes(b"".join(data))


def check(wh: Warehouse, path: Path, table: str, rows: list[dict[str, object] | bytes], stage: int) -> None:
    """stage 0: parse only; 1: and the load API's contract checks; 2: and a load into DuckDB."""
    importer = FileImporter(path, wh.input_columns(table), table)
    batches = list(importer.batches())
    parsed = sum(b.frames[table].height for b in batches)
    rejected = sum(len(b.rejects) for b in batches)
    assert parsed + rejected == len(rows), "every line is a row or a reject"
    for batch in batches:
        if stage == 2:
            report = wh.load_batch(batch)
            assert report.loaded + report.unchanged + report.quarantined == batch.frames[table].height + len(
                batch.rejects)
        elif stage == 1:
            good, bad = wh._validate(table, batch.frames[table], batch.source)
            assert good.height + len(bad) == batch.frames[table].height
            for reject in bad:
                assert reject.record.startswith(str(path.resolve())) and reject.field and reject.reason
    if stage == 2:
        assert wh.query("SELECT count(*) AS n FROM jobs WHERE cluster = 'baseline'")["n"][0] == BASELINE


def run(wh: Warehouse, folder: Path, table: str, suffix: str, data: st.DataObject) -> None:
    types = {c.name: c.sql_type for c in wh.columns(table) if c.name in wh.input_columns(table)}
    rows = data.draw(lines(table, types))
    path = folder / f"{table}{suffix}"
    write(path, rows, list(GOOD[table]))
    # Every example is parsed; the contract checks (30-50 ms of polars planning for a handful of rows)
    # run on one in 20 and a DuckDB load on one in 100, which keeps 10,000 examples within a minute.
    share = data.draw(st.integers(0, 99))
    check(wh, path, table, rows, stage=2 if share == 0 else 1 if share < 5 else 0)


@HOSTILE
@given(data=st.data(), table=st.sampled_from(TABLES))
def test_jsonl(warehouse: Warehouse, folder: Path, table: str, data: st.DataObject) -> None:
    run(warehouse, folder, table, ".jsonl", data)


@HOSTILE
@given(data=st.data(), table=st.sampled_from(TABLES))
def test_csv(warehouse: Warehouse, folder: Path, table: str, data: st.DataObject) -> None:
    run(warehouse, folder, table, ".csv", data)
