"""Malformed and truncated input to every Slurm parser: a clear rejection
naming the field, never a crash, never part of a job."""

from __future__ import annotations

import copy
import io
import json
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preemptlens.collectors.slurm import SacctRead, build_batch, read_document
from preemptlens.collectors.slurm import sacct as slurm_sacct
from preemptlens.collectors.slurm.log import parse_line
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.collectors.slurm.sacct import TEXT_FIELDS, RecordError, parse_json_record, parse_text_record
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


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 80), mutated()), max_size=3), st.sampled_from([2, 4]))
def test_records_read_alike_in_runs_and_alone(
    monkeypatch: pytest.MonkeyPatch, bad: list[tuple[int, dict[str, Any]]], indent: int,
) -> None:
    """Pretty-printed, records are decoded in runs; compact, one at a time:
    the same records and the same failures either way, whatever is wrong
    with a record (another shape, a bad value, NaN that only Python reads)."""
    monkeypatch.setattr(slurm_sacct, "_RUN_BYTES", 12_000)  # many runs
    jobs = [RECORDS[i % len(RECORDS)] for i in range(80)]
    for at, record in bad:
        jobs.insert(at, record)

    def read(layout: int | None) -> tuple[Any, ...]:
        got = read_document(io.BytesIO(json.dumps({"jobs": jobs}, indent=layout).encode()), "json", "d")
        return got.records, got.rejects, got.bad_jobs

    assert read(indent) == read(None)
