"""Malformed and truncated input to every Slurm parser: a clear rejection
naming the field, never a crash, never part of a job."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preemptlens.collectors import slurm_sacct
from preemptlens.collectors.slurm import SacctRead, build_batch, read_document
from preemptlens.collectors.slurm_log import parse_line
from preemptlens.collectors.slurm_policy import Policy
from preemptlens.collectors.slurm_sacct import (
    TEXT_FIELDS,
    DocumentError,
    RecordColumns,
    RecordError,
    RunPool,
    SacctRecord,
    iter_json_batches,
    parse_json_record,
    parse_text_record,
)
from preemptlens.warehouse import Warehouse

CASES = Path(__file__).resolve().parent.parent / "cases" / "sacct"
DOCS = {name: (CASES / name).read_text() for name in
        ("mixed_22_05.json", "mixed_23_02.json", "mixed_23_11.json", "mixed_24_11.json")}
RECORDS = [r for text in DOCS.values() for r in json.loads(text)["jobs"]]
TEXT_LINES = (CASES / "requeued_job_22_05.txt").read_text().splitlines()

junk = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.floats(allow_nan=True), st.text(max_size=8),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.just({"set": True, "infinite": False}), st.just({"set": False}),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


def _mutate(record: dict[str, Any], path: tuple[Any, ...], value: Any, delete: bool) -> dict[str, Any]:
    out = copy.deepcopy(record)
    holder = out
    for step in path[:-1]:
        holder = holder[step]
    if delete and isinstance(holder, dict):
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return out


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    record = draw(st.sampled_from(RECORDS))
    path = draw(st.sampled_from(_paths(record)))
    return _mutate(record, path, draw(junk), draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(mutated())
def test_json_record_parses_or_names_the_field(record: dict[str, Any]) -> None:
    try:
        parsed = parse_json_record(record)
    except RecordError as exc:
        assert exc.field and exc.reason
        return
    assert parsed.job_id and parsed.state
    assert parsed.gpus >= 0


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(DOCS)), st.data())
def test_truncated_document_never_crashes(name: str, data: st.DataObject) -> None:
    text = DOCS[name]
    cut = data.draw(st.integers(0, len(text)))
    read = read_document(io.StringIO(text[:cut]), "json", name)
    full = len(json.loads(text)["jobs"])
    assert len(read.records) <= full
    if cut < len(text.rstrip()):
        assert read.rejects or len(read.records) == full


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TEXT_LINES), st.data())
def test_text_line_parses_or_names_the_field(line: str, data: st.DataObject) -> None:
    parts = line.split("|", len(TEXT_FIELDS) - 1)
    i = data.draw(st.integers(0, len(parts) - 1))
    parts[i] = data.draw(st.text(max_size=12))
    broken = "|".join(parts)
    if data.draw(st.booleans()):
        broken = broken[: data.draw(st.integers(0, len(broken)))]
    try:
        parsed = parse_text_record(broken)
    except RecordError as exc:
        assert exc.field in (*TEXT_FIELDS, "line")
        return
    assert parsed.job_id[0].isdigit()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_log_lines_never_crash(tail: str) -> None:
    for line in (tail, "[2026-11-02T10:00:00.000] preempted JobId=" + tail,
                 "[" + tail + "] preempted JobId=1 has been requeued to reclaim resources for JobId=2"):
        try:
            link = parse_line(line, UTC, "x:1")
        except ValueError:
            continue
        assert link is None or link.victim[0].isdigit()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated(), min_size=1, max_size=4))
def test_no_partial_jobs_reach_the_warehouse(bad: list[dict[str, Any]]) -> None:
    doc = json.loads(DOCS["mixed_23_11.json"])
    doc["jobs"] += bad
    read: SacctRead = read_document(io.StringIO(json.dumps(doc)), "json", "doc")
    batch = build_batch("c1", read, Policy())
    runs = batch.frames["job_runs"]
    # Every job that made it has runs 1..n with none missing.
    for job_id, numbers in runs.group_by("job_id").agg("run").rows():
        assert sorted(numbers) == list(range(1, len(numbers) + 1)), job_id
    assert not (set(runs["job_id"]) & read.bad_jobs)
    with Warehouse(":memory:") as wh:
        report = wh.load_batch(batch)
        assert report.quarantined >= len(batch.rejects)


@pytest.fixture(scope="module")
def pool() -> Iterator[RunPool]:
    """Workers that take runs from a document's first byte on."""
    with RunPool(workers=2, after=0) as started:
        assert started.ready(0)
        yield started


def _items(text: str, pool: RunPool | None) -> list[Any]:
    """The records the reader yields (where runs end may differ), the
    failures, and where it stops on a broken document."""
    out: list[Any] = []
    try:
        for item in iter_json_batches(io.BytesIO(text.encode()), chunk=4096, pool=pool):
            if isinstance(item, RecordColumns):
                out += [SacctRecord(*row) for row in zip(*item.columns.values(), strict=True)]
                continue
            try:
                out.append(parse_json_record(item[0]))
            except RecordError as exc:
                out.append((exc.field, exc.reason, item[1]))
    except DocumentError as exc:
        out.append((exc.offset, exc.reason))
    return out


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 80), mutated()), max_size=3), st.sampled_from([2, 4]), st.data())
def test_runs_read_by_workers_come_as_read_in_one_process(
    pool: RunPool, monkeypatch: pytest.MonkeyPatch, bad: list[tuple[int, dict[str, Any]]], indent: int,
    data: st.DataObject,
) -> None:
    """Whatever a worker cannot read (another shape, a bad value, a broken
    or cut document, the end of the array) is read again in this process:
    the same records, in the same order, the same stop on a broken document."""
    monkeypatch.setattr(slurm_sacct, "_BATCH", 12_000)  # many runs in flight at once
    jobs = [RECORDS[i % len(RECORDS)] for i in range(80)]
    for at, record in bad:
        jobs.insert(at, record)
    text = json.dumps({"jobs": jobs, "meta": {"plugin": {"data_parser": "x"}}, "errors": [{"a": 1}]},
                      indent=indent)
    cut = data.draw(st.one_of(st.just(len(text)), st.integers(len(text) // 2, len(text))))
    assert _items(text[:cut], pool) == _items(text[:cut], None)
