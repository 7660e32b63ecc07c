"""Slurm's parsers against hostile values: sacct JSON (every version shape), sacct --parsable2 and
the slurmctld log. No exception but a SourceError escapes; every record is read or quarantined;
the contract checks then accept or quarantine every row."""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import pytest
from hostile_values import HOSTILE, NASTY_TEXT, mutated, text
from hypothesis import given
from hypothesis import strategies as st

from preemptlens.collectors.slurm import build_batch, read_document
from preemptlens.collectors.slurm.log import read_log
from preemptlens.collectors.slurm.policy import Partition, Policy
from preemptlens.errors import SourceError
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.hostile

CASES = Path(__file__).resolve().parents[1] / "cases" / "sacct"
DOCUMENTS = {name: json.loads((CASES / name).read_text()) for name in
             ("mixed_22_05.json", "mixed_23_02.json", "mixed_23_11.json", "mixed_24_11.json")}
TEXT_LINES = (CASES / "requeued_job_22_05.txt").read_text().splitlines()
LOG_LINES = (CASES / "ctld_variants.log").read_text().splitlines()
POLICY = Policy(preempt_type="partition_prio", global_mode="REQUEUE",
                partitions={"low": Partition("low", 1, "REQUEUE"), "high": Partition("high", 10, "OFF")})


@pytest.fixture(scope="module")
def warehouse() -> Iterator[Warehouse]:
    with Warehouse(":memory:") as wh:
        yield wh


def contract(wh: Warehouse, read: object, share: int) -> None:
    batch = build_batch("c1", read, POLICY)  # type: ignore[arg-type]
    if share == 0:
        for table, frame in batch.frames.items():
            good, bad = wh._validate(table, frame, batch.source)
            assert good.height + len(bad) <= frame.height  # a job's runs share one jobs row
            assert all(r.field and r.reason for r in bad)


@HOSTILE
@given(data=st.data(), name=st.sampled_from(sorted(DOCUMENTS)))
def test_sacct_json(warehouse: Warehouse, name: str, data: st.DataObject) -> None:
    document = DOCUMENTS[name]
    jobs = data.draw(st.lists(st.sampled_from(document["jobs"]), min_size=1, max_size=4))
    doc = {**document, "jobs": [data.draw(mutated(job)) for job in jobs]}
    body = json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
    try:
        read = read_document(io.BytesIO(body), "json", name)
    except SourceError:
        return
    documentwide = [r for r in read.rejects if r.field == "document"]
    assert read.count() + len(read.rejects) == len(jobs) or documentwide
    contract(warehouse, read, data.draw(st.integers(0, 19)))


@HOSTILE
@given(data=st.data())
def test_sacct_parsable2(warehouse: Warehouse, data: st.DataObject) -> None:
    lines = []
    for line in data.draw(st.lists(st.sampled_from(TEXT_LINES), min_size=1, max_size=4)):
        fields = line.split("|")
        for i in data.draw(st.lists(st.integers(0, len(fields) - 1), max_size=3)):
            # sacct's output is decoded bytes: it holds no half surrogate pair, whatever else it holds.
            value = data.draw(text).encode("utf-8", "replace").decode("utf-8")
            fields[i] = value.replace("\n", " ").replace("\r", " ")
        lines.append("|".join(fields))
    read = read_document(io.StringIO("\n".join(lines) + "\n"), "parsable2", "sacct.txt")
    assert read.count() + len(read.rejects) == len([ln for ln in lines if ln.strip()])
    contract(warehouse, read, data.draw(st.integers(0, 19)))


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


stamps = st.one_of(st.sampled_from(["2026-11-02T10:00:00.120", "2026-11-02T10:00:00+02:00", "9999-12-31T23:59:59",
                                    "0001-01-01T00:00:00", "2026-02-30T00:00:00", "", "nan"]), text)


@HOSTILE
@given(data=st.data())
def test_slurmctld_log(folder: Path, data: st.DataObject) -> None:
    lines: list[bytes] = []
    for _ in range(data.draw(st.integers(1, 6))):
        kind = data.draw(st.integers(0, 3))
        if kind == 0:
            lines.append(data.draw(st.sampled_from(LOG_LINES)).encode())
        elif kind == 1:
            lines.append(data.draw(st.binary(max_size=60)).replace(b"\n", b" "))
        else:
            victim, preemptor = data.draw(text), data.draw(st.one_of(text, st.sampled_from(NASTY_TEXT)))
            template = ("[{t}] preempted JobId={v} has been requeued to reclaim resources for JobId={p}"
                        if kind == 2 else "[{t}] preempted JobId={v} had to be killed")
            lines.append(template.format(t=data.draw(stamps), v=victim, p=preemptor).replace("\n", " ")
                         .encode("utf-8", "surrogatepass"))
    path = folder / "slurmctld.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    read = read_log(path, None, UTC)
    assert len(read.links) + len(read.bad) <= len(lines)
    assert read.cursor.offset == path.stat().st_size
    for link in read.links:
        assert link.time.tzinfo is not None
