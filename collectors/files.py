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
from typing import Any, BinaryIO

import polars as pl

from preemptlens.contract import Batch, Reject, encodable
from preemptlens.errors import SourceError

CHUNK_ROWS = 100_000
# A line longer than this is quarantined unread (CSV fields are further held to the csv module's
# 128 KiB field_size_limit); both are documented in docs/import-format.md.
MAX_LINE_BYTES = 1 << 20
# How much of a rejected line quarantine keeps.
RAW_CHARS = 500
# Tables a file may hold; the simulator's truth tables are not importable.
IMPORTABLE = ("pools", "jobs", "job_runs", "job_aliases", "preemption_links", "checkpoints", "gpu_samples",
              "scheduler_policy")


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
        # Escaped text of the lines that could not be read, by line number, until they are rejected.
        self._raw: dict[int, str] = {}

    def _lines(self, handle: BinaryIO) -> Iterator[tuple[int, str | None, str]]:
        """Each physical line: its number, its text and what is wrong with it ('' when nothing).

        Lines are decoded one by one, so a stray byte that is not UTF-8 costs its line and not the
        file: such a line comes with its bytes escaped (so that a CSV record spanning it keeps its
        shape) and the problem. A line longer than MAX_LINE_BYTES is skipped without being held in
        memory whole: its text is None."""
        number = 0
        while True:
            chunk = handle.readline(MAX_LINE_BYTES + 1)
            if not chunk:
                return
            number += 1
            if len(chunk) > MAX_LINE_BYTES and not chunk.endswith(b"\n"):
                # Kept before the line is reported: its consumer takes it from _raw as soon as it is told.
                self._raw[number] = chunk[:200].decode("utf-8", "backslashreplace") + "..."
                while chunk and not chunk.endswith(b"\n"):
                    chunk = handle.readline(MAX_LINE_BYTES + 1)
                yield number, None, f"line longer than {MAX_LINE_BYTES:,} bytes"
                continue
            try:
                # utf-8-sig on the first line: a byte-order mark is not part of the first column's name.
                yield number, chunk.decode("utf-8-sig" if number == 1 else "utf-8"), ""
            except UnicodeDecodeError as exc:
                # The line's bytes are kept, escaped, so that the quarantine shows exactly what was there.
                escaped = chunk.decode("utf-8", "backslashreplace")
                self._raw[number] = escaped.rstrip("\r\n")[:RAW_CHARS]
                yield number, escaped, f"not valid UTF-8 (byte 0x{chunk[exc.start]:02x} at offset {exc.start})"

    def _records(self) -> Iterator[tuple[int, dict[str, Any] | None, str, str]]:
        """Each record: its line number, the record (or None and what is wrong with it) and its text."""
        suffix = self.path.suffix.lower()
        if suffix not in (".csv", ".jsonl", ".ndjson", ".json"):
            raise SourceError(f"{self.path}: unknown file type {suffix!r}", "use .jsonl (or .ndjson) or .csv")
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot open: {exc.strerror}") from None
        with handle:
            if suffix == ".csv":
                yield from self._csv_records(handle)
                return
            for line, text, problem in self._lines(handle):
                if text is None or problem:
                    yield line, None, problem, self._raw.pop(line, "")
                    continue
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as exc:
                    yield line, None, f"not valid JSON: {exc.msg}", text
                    continue
                except ValueError as exc:
                    # An integer of more than 4,300 digits (Python's int conversion limit).
                    yield line, None, f"not valid JSON: {exc}", text
                    continue
                except RecursionError:
                    yield line, None, "not valid JSON: nested too deeply", text
                    continue
                if isinstance(obj, dict):
                    yield line, obj, "", text
                else:
                    yield line, None, f"expected a JSON object, got {type(obj).__name__}", text

    def _csv_records(self, handle: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | None, str, str]]:
        # The csv module counts the lines it was given; a record is located by the physical line it ended
        # on. A line that is not UTF-8 is still given (escaped), so that a quoted field spanning it keeps
        # the record's shape; the record it falls in is rejected for it, once. A line too long to read
        # is not given at all and is reported on its own.
        fed: list[int] = []
        undecodable: dict[int, str] = {}
        unreadable: list[tuple[int, str]] = []

        def readable() -> Iterator[str]:
            for line, text, problem in self._lines(handle):
                if text is None:
                    unreadable.append((line, problem))
                    continue
                if problem:
                    undecodable[line] = problem
                fed.append(line)
                yield text

        def spanned(first: int) -> list[tuple[int, str]]:
            """The undecodable lines (and their problems) of the record that ended at the reader's line."""
            return [(line, undecodable.pop(line)) for line in fed[first:reader.line_num] if line in undecodable]

        reader = csv.reader(readable())
        header: list[str] | None = None
        first = 0  # where in `fed` the next record starts
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                # A field over csv.field_size_limit() (128 KiB), a NUL byte, a broken quote: this record only.
                line = fed[reader.line_num - 1] if reader.line_num else 0
                for bad, _ in spanned(first):
                    self._raw.pop(bad, None)
                first = reader.line_num
                yield from self._flush_unreadable(unreadable)
                yield line, None, f"not valid CSV: {exc}", ""
                continue
            yield from self._flush_unreadable(unreadable)
            line = fed[reader.line_num - 1]
            broken = spanned(first)
            first = reader.line_num
            if header is None:
                header = row
                continue
            if broken:
                (bad, problem), raws = broken[0], [self._raw.pop(b, "") for b, _ in broken]
                where = f"line {bad}: " if bad != line else ""
                yield line, None, where + problem, raws[0]
                continue
            if not row:
                continue
            if len(row) > len(header):
                yield line, None, "more fields than the header has", json.dumps(row)[:RAW_CHARS]
                continue
            yield line, dict(zip(header, [*row, *([None] * (len(header) - len(row)))], strict=True)), "", ""
        yield from self._flush_unreadable(unreadable)

    def _flush_unreadable(self, unreadable: list[tuple[int, str]]) -> Iterator[tuple[int, None, str, str]]:
        for line, problem in unreadable:
            yield line, None, problem, self._raw.pop(line, "")
        unreadable.clear()

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
                raw = text.rstrip("\r\n")[:RAW_CHARS]
                rejects.append(Reject(self.table, f"{locator}:{line}", "(line)", problem, raw=raw))
                continue
            unknown = sorted(set(record) - allowed)
            if unknown:
                name = unknown[0].encode("utf-8", "backslashreplace").decode("utf-8")
                rejects.append(
                    Reject(
                        self.table,
                        f"{locator}:{line}",
                        name,
                        f"{name} is not a column of {self.table}",
                        raw=json.dumps(record, default=str)[:RAW_CHARS],
                    )
                )
                continue
            values = [_text(record.get(column)) for column in self.columns]
            broken = next((c for c, v in zip(self.columns, values, strict=True) if v is not None and not encodable(v)),
                          None)
            if broken is not None:
                # JSON may escape half a surrogate pair (\ud800): no text column can hold it.
                rejects.append(Reject(self.table, f"{locator}:{line}", broken, f"{broken} is not valid Unicode "
                                      "(half a surrogate pair)", raw=json.dumps(record, default=str)[:RAW_CHARS]))
                continue
            for column, value in zip(self.columns, values, strict=True):
                rows[column].append(value)
            rows["_record"].append(f"{locator}:{line}")
            if len(rows["_record"]) >= CHUNK_ROWS:
                yield flush()
        if rows["_record"] or rejects:
            yield flush()
