"""Plain JSONL and CSV files of contract rows (the generic importer).

One file holds rows of one raw table: `--table`, or the file name's stem
(`jobs.jsonl`, `job_runs-2026-11.csv`, `gpu_samples.part3.jsonl`). Columns are
the table's contract columns (docs/import-format.md); values may be strings,
numbers or booleans, times ISO 8601 (naive means UTC) or epoch seconds.

A line that is not JSON, not an object, or names an unknown column becomes a
`Reject` located as `<file>:<line>`; so does a row the load API finds invalid,
since every row carries its `file:line` in `_record`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from preemptlens.contract import Batch, Reject
from preemptlens.errors import SourceError

CHUNK_ROWS = 100_000
# Tables a file may hold; the simulator's truth tables are not importable.
IMPORTABLE = ("pools", "jobs", "job_runs", "job_aliases", "preemption_links", "checkpoints", "gpu_samples")


def table_for(path: Path, explicit: str | None) -> str:
    if explicit:
        table = explicit
    else:
        stem = path.name.split(".")[0]
        matches = [t for t in IMPORTABLE if stem == t or stem.startswith((t + "-", t + "_"))]
        # job_runs starts with "job": the longest matching name is the right one.
        table = max(matches, key=len) if matches else ""
    if table not in IMPORTABLE:
        raise SourceError(
            f"{path}: cannot tell which table this file holds",
            f"name it after the table ({', '.join(IMPORTABLE)}) or pass --table",
        )
    return table


def _text(value: Any) -> str | None:
    """Every value enters as text; the load API casts it to the column's type."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value.strip() != "" else None
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


class FileImporter:
    name = "import"
    tables = IMPORTABLE

    def __init__(self, path: Path, columns: list[str], table: str) -> None:
        self.path = path
        self.table = table
        self.columns = columns
        self.source = f"import:{path.name}"

    def _records(self) -> Iterator[tuple[int, dict[str, Any] | None, str, str]]:
        """Each line: its number, the record (or None and what is wrong with it) and its text."""
        suffix = self.path.suffix.lower()
        try:
            handle = self.path.open(newline="" if suffix == ".csv" else None, encoding="utf-8")
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot open: {exc.strerror}") from None
        with handle:
            if suffix == ".csv":
                reader = csv.DictReader(handle)
                for row in reader:
                    if None in row:
                        yield reader.line_num, None, "more fields than the header has", json.dumps(row)
                    else:
                        yield reader.line_num, dict(row), "", ""
            elif suffix in (".jsonl", ".ndjson", ".json"):
                for line, text in enumerate(handle, start=1):
                    if not text.strip():
                        continue
                    try:
                        obj = json.loads(text)
                    except json.JSONDecodeError as exc:
                        yield line, None, f"not valid JSON: {exc.msg}", text
                        continue
                    if isinstance(obj, dict):
                        yield line, obj, "", text
                    else:
                        yield line, None, f"expected a JSON object, got {type(obj).__name__}", text
            else:
                raise SourceError(f"{self.path}: unknown file type {suffix!r}", "use .jsonl (or .ndjson) or .csv")

    def batches(self) -> Iterator[Batch]:
        allowed = set(self.columns)
        rows: dict[str, list[str | None]] = {c: [] for c in [*self.columns, "_record"]}
        rejects: list[Reject] = []
        locator = str(self.path.resolve())

        def flush() -> Batch:
            frame = pl.DataFrame(rows, schema={c: pl.String for c in rows})
            batch = Batch(source=self.source, frames={self.table: frame}, rejects=list(rejects))
            for values in rows.values():
                values.clear()
            rejects.clear()
            return batch

        for line, record, problem, text in self._records():
            if record is None:
                raw = text.rstrip("\n")[:500]
                rejects.append(Reject(self.table, f"{locator}:{line}", "(line)", problem, raw=raw))
                continue
            unknown = sorted(set(record) - allowed)
            if unknown:
                rejects.append(
                    Reject(
                        self.table,
                        f"{locator}:{line}",
                        unknown[0],
                        f"{unknown[0]} is not a column of {self.table}",
                        raw=json.dumps(record, default=str)[:500],
                    )
                )
                continue
            for column in self.columns:
                rows[column].append(_text(record.get(column)))
            rows["_record"].append(f"{locator}:{line}")
            if len(rows["_record"]) >= CHUNK_ROWS:
                yield flush()
        if rows["_record"] or rejects:
            yield flush()
