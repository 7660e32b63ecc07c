"""The Slurm parsers on recorded documents of every version shape.

mixed_*.json hold the same seven records written in the documented shape of
each version (22.05, 23.02, 23.11, 24.11): a job preempted then completed, its
preemptor, an array task with typed GPUs that was requeued and is running
again, a failed heterogeneous component and a pending job. The expected rows
below are stated once, so every shape must read to the same contract rows.
requeued_job_22_05.* are real output of the local Slurm the integration test
starts.
"""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preemptlens.analytics.attribution import attributed, rebuild
from preemptlens.collectors.slurm import Options, SlurmCollector, build_batch, read_document
from preemptlens.collectors.slurm import sacct as slurm_sacct
from preemptlens.collectors.slurm.log import LogCursor, read_log, zone_of
from preemptlens.collectors.slurm.policy import (
    Partition,
    Policy,
    Qos,
    parse_partitions,
    parse_qos,
    preempt_type_from_config,
)
from preemptlens.collectors.slurm.sacct import DocumentError, iter_json_jobs, parse_json_record, run_state
from preemptlens.errors import ConfigError, SourceError
from preemptlens.warehouse import Warehouse

CASES = Path(__file__).resolve().parent.parent / "cases" / "sacct"
T0 = 1796200000
POLICY = Policy(
    preempt_type="partition_prio",
    global_mode="REQUEUE",
    partitions={"low": Partition("low", 1, "REQUEUE"), "high": Partition("high", 10, "OFF")},
)

# (job_id, run) -> (state, gpus, submit, eligible, start, end, hosts, reason)
EXPECTED_RUNS = {
    ("100", 1): ("preempted", 4, T0, T0, T0 + 5, T0 + 300, "gpu01", None),
    ("100", 2): ("completed", 4, T0 + 300, T0 + 421, T0 + 905, T0 + 2000, "gpu02", "BeginTime"),
    ("101", 1): ("completed", 4, T0 + 290, T0 + 290, T0 + 300, T0 + 900, "gpu01", None),
    ("102_3", 1): ("requeued", 2, T0 + 10, T0 + 10, T0 + 20, T0 + 400, "gpu03", None),
    ("102_3", 2): ("running", 2, T0 + 400, T0 + 521, T0 + 530, None, "gpu03", None),
    ("103+1", 1): ("failed", 0, T0 + 50, T0 + 50, T0 + 60, T0 + 70, "gpu04", None),
    ("105", 1): ("pending", 8, T0 + 60, T0 + 60, None, None, None, "Resources"),
}


def _ts(epoch: int | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _load(path: Path, fmt: str = "json") -> Warehouse:
    with path.open() as stream:
        read = read_document(stream, fmt, path.name)
    wh = Warehouse(":memory:")
    wh.load_batch(build_batch("c1", read, POLICY))
    return wh


@pytest.mark.parametrize("name", ["mixed_22_05.json", "mixed_23_02.json", "mixed_23_11.json", "mixed_24_11.json"])
def test_every_version_shape_reads_to_the_same_rows(name: str) -> None:
    wh = _load(CASES / name)
    runs = wh.query("SELECT * FROM job_runs ORDER BY job_id, run")
    got = {
        (r["job_id"], r["run"]): (r["state"], r["gpus"], r["submit_time"], r["eligible_time"], r["start_time"],
                                  r["end_time"], r["hosts"], r["reason"])
        for r in runs.iter_rows(named=True)
    }
    want = {
        k: (state, gpus, _ts(sub), _ts(elig), _ts(start), _ts(end), hosts, why)
        for k, (state, gpus, sub, elig, start, end, hosts, why) in EXPECTED_RUNS.items()
    }
    assert got == want
    assert wh.query("SELECT count(*) AS n FROM quarantine")["n"][0] == 0
    jobs = wh.query("SELECT * FROM jobs ORDER BY job_id")
    by_id = {r["job_id"]: r for r in jobs.iter_rows(named=True)}
    assert set(by_id) == {"100", "101", "102_3", "103+1", "105"}
    # First submission, not the requeue's reset submit time.
    assert by_id["100"]["submit_time"] == _ts(T0)
    assert by_id["100"]["team"] == "vision" and by_id["100"]["user_name"] == "ana"
    assert (by_id["100"]["tier"], by_id["100"]["preemptible"]) == ("low", True)
    assert (by_id["101"]["tier"], by_id["101"]["preemptible"]) == ("high", False)
    assert by_id["101"]["priority_value"] == 9000
    assert by_id["105"]["gpus"] == 8  # requested, as nothing is allocated yet


def test_real_22_05_capture_numbers_runs_by_submission() -> None:
    wh = _load(CASES / "requeued_job_22_05.json")
    runs = wh.query("SELECT job_id, run, state, gpus FROM job_runs ORDER BY job_id, run")
    assert runs.rows() == [
        ("1", 1, "preempted", 4), ("1", 2, "preempted", 4), ("1", 3, "completed", 4),
        ("2_0", 1, "preempted", 1), ("2_0", 2, "completed", 1),
        ("2_1", 1, "preempted", 1), ("2_1", 2, "completed", 1),
        ("3", 1, "preempted", 2), ("3", 2, "completed", 2),
        ("5", 1, "completed", 4), ("6", 1, "completed", 8),
    ]
    # Requeue delay as Slurm records it: next start minus the preempted end.
    delay = wh.query(
        "SELECT epoch(b.start_time) - epoch(a.end_time) AS d FROM job_runs a JOIN job_runs b "
        "ON a.job_id = b.job_id AND b.run = a.run + 1 WHERE a.job_id = '1' AND a.run = 1"
    )["d"][0]
    assert delay == 11


def test_parsable2_text_reads_like_json() -> None:
    wh = _load(CASES / "requeued_job_22_05.txt", "parsable2")
    runs = wh.query("SELECT job_id, run, state, gpus, hosts, start_time FROM job_runs ORDER BY job_id, run")
    assert runs.select("job_id", "run", "state", "gpus").rows() == [
        ("1", 1, "preempted", 4), ("1", 2, "preempted", 4), ("1", 3, "completed", 4),
        ("2_0", 1, "preempted", 1), ("2_0", 2, "cancelled", 1),
        ("5", 1, "completed", 4), ("7", 1, "pending", 2),
    ]
    pending = runs.filter(pl.col("job_id") == "7").row(0, named=True)
    assert pending["hosts"] is None and pending["start_time"] is None
    # The job name is the last field because it may contain the separator.
    assert wh.query("SELECT name FROM jobs WHERE job_id = '2_0'")["name"][0] == "low|array"


def _with_raw_ids(lines: list[str], raw: dict[str, str]) -> list[str]:
    """Lines of the old field list rewritten in `PREVIOUS_TEXT_FIELDS` order, JobIDRaw second."""
    out = []
    for line in lines:
        job_id, rest = line.split("|", 1)
        out.append(f"{job_id}|{raw[job_id]}|{rest}")
    return out


def test_parsable2_text_with_job_id_raw_gives_array_task_aliases() -> None:
    assert slurm_sacct.text_format_arg().startswith("--format=JobID,JobIDRaw,Partition,")
    old = (CASES / "requeued_job_22_05.txt").read_text().splitlines(keepends=True)
    raw = {"1": "1", "5": "5", "2_0": "3", "7": "7"}
    header = "|".join(slurm_sacct.PREVIOUS_TEXT_FIELDS) + "\n"  # as sacct prints it without --noheader
    new = read_document(io.StringIO(header + "".join(_with_raw_ids(old, raw))), "parsable2", "new.txt")
    before = read_document(io.StringIO("".join(old)), "parsable2", "old.txt")
    assert not new.rejects and not before.rejects
    # The same runs, the name holding "|" included, whichever list the lines were written with.
    assert [rec._replace(alias=None) for _, rec in new.records] == [rec for _, rec in before.records]
    assert {rec.job_id: rec.alias for _, rec in new.records} == {"1": None, "5": None, "2_0": "3", "7": None}
    assert {rec.alias for _, rec in before.records} == {None}
    batch = build_batch("c1", new, POLICY)
    assert batch.frames["job_aliases"].select("alias", "job_id").rows() == [("3", "2_0")]


def test_parsable2_line_of_either_field_list_is_told_apart_by_its_fields() -> None:
    fields = ["1234", "low", "normal", "acct", "alice", "CANCELLED by 0", "None", "10", "1796243261",
              "1796243261", "1796243265", "1796243270", "gres/gpu=2", "gres/gpu=2", "node1", "a|b|c"]
    old = slurm_sacct.parse_text_record("|".join(fields))
    new = slurm_sacct.parse_text_record("|".join([fields[0], "1234", *fields[1:]]))
    assert old == new and old.name == "a|b|c" and old.state == "cancelled"
    task = slurm_sacct.parse_text_record("|".join(["1230_4", "1234", *fields[1:]]))
    assert (task.job_id, task.alias, task.name) == ("1230_4", "1234", "a|b|c")
    with pytest.raises(slurm_sacct.RecordError) as bad:
        slurm_sacct.parse_text_record("|".join(fields[:9]))
    assert bad.value.field == "line"


def test_who_asked_for_the_end_is_kept_from_json_and_text() -> None:
    """22.05's JSON (openapi/dbv0.0.38) names who asked for a job's end as `kill_request_user`, a user name (the
    suite's real Slurm writes "root" for a root's scancel, nothing for `scontrol requeue`, a preemption or a time
    limit: test_slurm_run_ends); the text State says "CANCELLED by <uid>"."""
    record = json.loads((CASES / "requeued_job_22_05.json").read_text())["jobs"][0]
    cancelled = {**record, "state": {"current": "CANCELLED", "reason": "None"}, "kill_request_user": "root"}
    assert parse_json_record(cancelled).ended_by == "root"
    assert parse_json_record(record).ended_by is None
    with pytest.raises(slurm_sacct.RecordError) as bad:
        parse_json_record({**cancelled, "kill_request_user": 7})
    assert bad.value.field == "kill_request_user"
    fields = ["1234", "1234", "low", "normal", "acct", "alice", "CANCELLED by 1001", "None", "10", "1796243261",
              "1796243261", "1796243265", "1796243270", "gres/gpu=2", "gres/gpu=2", "node1", "train"]
    assert slurm_sacct.parse_text_record("|".join(fields)).ended_by == "uid 1001"
    for state in ("CANCELLED", "COMPLETED", "CANCELLED by ?"):
        assert slurm_sacct.parse_text_record("|".join([*fields[:6], state, *fields[7:]])).ended_by is None
    read = read_document(io.StringIO("|".join(fields) + "\n"), "parsable2", "one.txt")
    assert build_batch("c1", read, POLICY).frames["job_runs"]["ended_by"].to_list() == ["uid 1001"]
@pytest.mark.parametrize(("limit", "seconds"), [
    ("UNLIMITED", float("inf")), ("Partition_Limit", slurm_sacct.PARTITION_LIMIT), ("1-00:00:00", 86400.0),
    ("00:30:00", 1800.0), ("", None),
])
def test_parsable2_time_limit_in_every_form_sacct_prints(limit: str, seconds: float | None) -> None:
    # src/sacct/print.c (PRINT_TIMELIMIT, slurm-22-05-11-1): UNLIMITED, Partition_Limit, mins2time_str.
    fields = ["1234", "1234", "low", "normal", "acct", "alice", limit, "COMPLETED", "None", "10", "1796243261",
              "1796243261", "1796243265", "1796243270", "gres/gpu=2", "gres/gpu=2", "node1", "a|b"]
    rec = slurm_sacct.parse_text_record("|".join(fields))
    assert rec.time_limit_s == seconds and rec.name == "a|b" and rec.state == "completed"
    previous = slurm_sacct.parse_text_record("|".join(fields[:6] + fields[7:]))
    assert previous.time_limit_s is None and previous._replace(time_limit_s=seconds) == rec
    with pytest.raises(slurm_sacct.RecordError) as bad:
        slurm_sacct.parse_text_record("|".join([*fields[:6], "soon", *fields[7:]]))
    assert bad.value.field == "Timelimit"


@pytest.mark.parametrize(("limit", "seconds"), [
    (60, 3600.0), (0xFFFFFFFF, float("inf")), (0xFFFFFFFE, slurm_sacct.PARTITION_LIMIT), (0, None),
    # 22.05 writes null for INFINITE and NO_VAL alike (dbv0.0.38 parse.c): the partition's limit resolves it.
    (None, slurm_sacct.PARTITION_LIMIT),
    ({"set": True, "infinite": False, "number": 60}, 3600.0), ({"set": True, "infinite": True, "number": 0},
                                                                float("inf")),
    ({"set": False, "infinite": False, "number": 0}, slurm_sacct.PARTITION_LIMIT),
])
def test_json_time_limit_of_every_version_shape(limit: Any, seconds: float | None) -> None:
    record = json.loads((CASES / "mixed_23_02.json").read_text())["jobs"][0]
    record["time"]["limit"] = limit
    assert parse_json_record(record).time_limit_s == seconds
    del record["time"]["limit"]
    assert parse_json_record(record).time_limit_s is None  # no member: unknown


def test_time_limits_reach_the_jobs_table_a_partitions_limit_where_the_job_set_none() -> None:
    wh = _load(CASES / "mixed_22_05.json")
    assert set(wh.query("SELECT time_limit_s, time_unlimited FROM jobs").rows()) == {(3600.0, False)}
    line = ("9|9|{part}|normal|acct|alice|{limit}|COMPLETED|None|10|1796243261|1796243261|1796243265|1796243270|"
            "gres/gpu=2|gres/gpu=2|node1|j{n}")
    text = "\n".join(line.format(part=part, limit=limit, n=n).replace("9|9", f"{n}|{n}")
                     for n, (part, limit) in enumerate((("low", "Partition_Limit"), ("high", "Partition_Limit"),
                                                        ("low", "UNLIMITED"), ("low", ""), ("nowhere",
                                                                                           "Partition_Limit")), 1))
    read = read_document(io.StringIO(text + "\n"), "parsable2", "limits.txt")
    policy = Policy(preempt_type="partition_prio", global_mode="REQUEUE", partitions={
        "low": Partition("low", 1, "REQUEUE", default_time_s=600.0, max_time_s=float("inf")),
        "high": Partition("high", 10, "OFF", max_time_s=float("inf"))})
    out = Warehouse(":memory:")
    out.load_batch(build_batch("c1", read, policy))
    assert out.query("SELECT job_id, time_limit_s, time_unlimited FROM jobs ORDER BY job_id").rows() == [
        ("1", 600.0, False), ("2", None, True), ("3", None, True), ("4", None, None), ("5", None, None)]


def test_second_load_of_the_same_document_changes_nothing() -> None:
    path = CASES / "mixed_23_11.json"
    wh = _load(path)
    with path.open() as stream:
        report = wh.load_batch(build_batch("c1", read_document(stream, "json", path.name), POLICY))
    assert report.loaded == 0 and report.unchanged == 7 + 5 + 2  # runs, jobs, two aliases (array task, het part)


@pytest.mark.parametrize("name", ["mixed_22_05.json", "mixed_23_02.json", "mixed_23_11.json", "mixed_24_11.json"])
def test_samples_labelled_with_an_array_tasks_own_id_reach_the_task(name: str) -> None:
    """The prolog hands dcgm-exporter (hpc_job) and jobstats (jobid) the
    task's own id, 110, where sacct says 102_3: the alias leads there, at the
    times a run of the task was on only."""
    wh = _load(CASES / name)
    assert wh.query("SELECT cluster, alias, job_id FROM job_aliases ORDER BY alias").rows() == [
        ("c1", "104", "103+1"), ("c1", "110", "102_3")]
    # 102_3 ran on gpu03 over [T0+20, T0+400) and again from T0+530 on; 100 ran on gpu01 first.
    # gpu03 reports four GPUs and the task holds two: the host tells nothing, only the label does.
    samples = [("110", "gpu03", 0, 100), ("110", "gpu03", 0, 450), ("110", "gpu03", 1, 3000), ("100", "gpu01", 0, 100),
               *((None, "gpu03", g, 3000) for g in (2, 3))]
    wh.load("gpu_samples", pl.DataFrame({
        "cluster": ["c1"] * len(samples), "host": [s[1] for s in samples],
        "gpu_uuid": [f"GPU-{s[1]}-{s[2]}" for s in samples], "time": [_ts(T0 + s[3]) for s in samples],
        "busy": [0.0] * len(samples), "job_id": [s[0] for s in samples],
    }), "prometheus")
    rebuild(wh)
    got = wh.query(f"SELECT time, job_id FROM ({attributed('gpu_samples')}) ORDER BY time, job_id").rows()
    # T0+450 lies between the task's runs: nobody's (the host rule has no whole-host run there either).
    assert got == [(_ts(T0 + 100), "100"), (_ts(T0 + 100), "102_3"), (_ts(T0 + 3000), "102_3")]


def test_real_array_capture_records_each_tasks_own_id() -> None:
    wh = _load(CASES / "requeued_job_22_05.json")
    # Slurm gave task 0 of array 2 the id 4 and task 1 the array's own id 2.
    assert sorted(wh.query("SELECT alias, job_id FROM job_aliases").rows()) == [("2", "2_1"), ("4", "2_0")]


def test_state_lists_and_flags() -> None:
    assert run_state(["PENDING", "REQUEUED"]) == "requeued"
    assert run_state(["PREEMPTED", "REQUEUED"]) == "preempted"
    assert run_state(["RUNNING", "COMPLETING"]) == "running"
    assert run_state(["CANCELLED"]) == "cancelled"
    assert run_state(["NODE_FAIL"]) == "node_fail"
    with pytest.raises(ValueError, match="unknown state BOGUS"):
        run_state(["BOGUS"])


def test_broken_record_quarantines_its_whole_job_and_nothing_else() -> None:
    text = (CASES / "mixed_22_05.json").read_text()
    # The second record of job 100 loses its start time's type.
    broken = text.replace('"start": 1796200905', '"start": "soon"', 1)
    assert broken != text
    read = read_document(io.StringIO(broken), "json", "doc.json")
    wh = Warehouse(":memory:")
    report = wh.load_batch(build_batch("c1", read, POLICY))
    runs = wh.query("SELECT DISTINCT job_id FROM job_runs ORDER BY job_id")["job_id"].to_list()
    assert runs == ["101", "102_3", "103+1", "105"]
    q = wh.query("SELECT record, field, reason FROM quarantine ORDER BY record")
    assert report.quarantined == 2
    assert q.filter(pl.col("field") == "time.start")["record"].to_list() == ["doc.json record 3 (JobId=100)"]
    assert "expected a number" in q.filter(pl.col("field") == "time.start")["reason"][0]
    assert q.filter(pl.col("field") == "job_id")["reason"].to_list() == ["another record of this job could not be read"]


def test_truncated_document_keeps_the_records_before_the_break() -> None:
    text = (CASES / "mixed_23_11.json").read_text()
    cut = text[: text.index('"name": "pipeline"')]
    read = read_document(io.StringIO(cut), "json", "cut.json")
    assert {r.job_id for _, r in read.records} == {"100", "101", "102_3"}
    assert read.rejects[-1].field == "document"
    assert "truncated" in read.rejects[-1].reason


def test_streaming_reader_is_independent_of_chunk_size() -> None:
    text = (CASES / "mixed_24_11.json").read_text()
    whole = list(iter_json_jobs(io.StringIO(text)))
    for chunk in (1, 3, 17, 4096):
        assert list(iter_json_jobs(io.StringIO(text), chunk=chunk)) == whole
    with pytest.raises(DocumentError):
        list(iter_json_jobs(io.StringIO('{"jobs": [{"job_id": 1} {"job_id": 2}]}'), chunk=4))


@pytest.mark.parametrize("name", ["mixed_22_05.json", "mixed_24_11.json"])
def test_layout_and_stream_kind_do_not_change_what_is_read(name: str) -> None:
    """The reader finds a pretty-printed record's end from its layout: any
    other layout, and text that only looks like such an end, read the same."""
    doc = json.loads((CASES / name).read_text())
    # A name holding the text of a record's closing line, and NaN, which only Python's json reads.
    doc["jobs"][0]["name"] = 'x\n}\n},\n{"job_id": 9}'
    doc["jobs"][1]["comment"] = {"job": float("nan")}
    expected = [(loc, rec) for loc, rec in read_document(io.StringIO(json.dumps(doc)), "json", "d").records]
    assert len(expected) == len(doc["jobs"])
    assert expected[0][1].name == 'x\n}\n},\n{"job_id": 9}'
    for indent in (None, 0, 1, 2, 4, "\t"):
        text = json.dumps(doc, indent=indent)
        for stream in (io.StringIO(text), io.BytesIO(text.encode())):
            for chunk in (7, 1 << 20):
                got = list(iter_json_jobs(stream, chunk=chunk))
                stream.seek(0)
                assert [r["job_id"] for r in got] == [r["job_id"] for r in doc["jobs"]]
            read = read_document(stream, "json", "d")
            assert read.records == expected, (indent, type(stream))
            assert not read.rejects


def _variants() -> list[dict[str, Any]]:
    """Records of every version shape, each also with its numbers and state
    in the other version's form, renumbered so that no two share a job."""
    base = [r for name in ("mixed_22_05.json", "mixed_23_02.json", "mixed_23_11.json", "mixed_24_11.json",
                           "requeued_job_22_05.json") for r in json.loads((CASES / name).read_text())["jobs"]]
    out = []
    for i, record in enumerate(base * 6):
        rec = json.loads(json.dumps(record))
        rec["job_id"] = 5000 + i
        if isinstance(rec.get("array"), dict) and rec["array"].get("job_id"):
            rec["array"]["job_id"] = 4000 + i
        kind = i // len(base)
        if kind == 1:
            rec["priority"] = {"set": True, "infinite": False, "number": 7 + i}
            rec["time"]["start"] = {"set": True, "infinite": False, "number": rec["time"]["submission"] + 3}
        elif kind == 2:
            state = rec["state"]["current"]
            rec["state"]["current"] = ",".join(state) if isinstance(state, list) else state.split(",")
        elif kind == 3:
            rec["time"]["end"] = 0  # not ended
            rec["restart_cnt"] = {"set": False, "infinite": False, "number": 0}
        elif kind == 4:
            rec["tres"]["allocated"] = []  # pending: the requested GPUs count
            rec["name"] = ""
        out.append(rec)
    return out


def test_runs_of_records_read_exactly_like_one_record_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs decoded by msgspec in one call give, record for record, what
    parse_json_record gives each record decoded alone, across run ends."""
    records = _variants()
    text = json.dumps({"jobs": records, "meta": {"plugin": {"data_parser": "x"}}}, indent=2)
    monkeypatch.setattr(slurm_sacct, "_RUN_BYTES", 20_000)  # many runs, ending anywhere
    runs = [run for run, _ in slurm_sacct.iter_json_records(io.BytesIO(text.encode()), chunk=4096)]
    assert len([run for run in runs if len(run) > 1]) > 10 and sum(map(len, runs)) == len(records)
    read = read_document(io.BytesIO(text.encode()), "json", "d")
    assert not read.rejects
    assert [rec for _, rec in read.records] == [parse_json_record(r) for r in records]
    assert [loc for loc, _ in read.records] == [f"d record {i}" for i in range(1, len(records) + 1)]


def test_a_bad_record_inside_a_run_is_named_and_its_neighbours_read(monkeypatch: pytest.MonkeyPatch) -> None:
    records = _variants()
    bad = 137
    records[bad]["time"]["start"] = "soon"
    records[bad]["comment"] = {"job": "shown whole"}
    text = json.dumps({"jobs": records}, indent=4)
    monkeypatch.setattr(slurm_sacct, "_RUN_BYTES", 50_000)
    read = read_document(io.BytesIO(text.encode()), "json", "d")
    job = str(5000 + bad)
    assert [(r.record, r.field) for r in read.rejects] == [(f"d record {bad + 1} (JobId={job})", "time.start")]
    assert json.loads(read.rejects[0].raw) == records[bad]
    assert read.bad_jobs == {job}
    expected = [parse_json_record(r) for i, r in enumerate(records) if i != bad]
    assert [rec for _, rec in read.records] == expected


def test_runs_read_alike_from_text_or_bytes_in_chunks_of_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run is framed as an array in the reader's own buffer, by the bytes
    around it: whatever the stream and chunk size, every record is read
    once, in order, with its own bytes."""
    records = _variants()
    text = json.dumps({"jobs": records}, indent=2)
    expected = [slurm_sacct.json_job_id(r) for r in records]
    monkeypatch.setattr(slurm_sacct, "_RUN_BYTES", 30_000)
    for stream in (io.StringIO(text), io.BytesIO(text.encode())):
        for chunk in (4096, 1 << 20):
            stream.seek(0)
            job_ids: list[str | None] = []
            in_runs = 0
            for run, bytes_of in slurm_sacct.iter_json_records(stream, chunk=chunk):
                job_ids += [slurm_sacct.json_job_id(r) for r in run]
                in_runs += len(run) if len(run) > 1 else 0
                assert [json.loads(bytes_of(k)) for k in range(len(run))] == records[len(job_ids) - len(run):
                                                                                     len(job_ids)]
            assert job_ids == expected, (type(stream), chunk)
            # A run spans what the buffer holds: most records are read in runs.
            assert in_runs > len(records) // 2


def test_a_record_reads_alike_in_a_run_and_alone() -> None:
    """The layout decides whether a record is decoded in a run or alone, never
    what is read: a number object out of range was loaded from a run (the run
    reader did not check it) and refused alone."""
    doc = json.loads((CASES / "mixed_23_11.json").read_text())
    doc["jobs"][1]["priority"] = {"set": True, "infinite": False, "number": 1e300}
    for indent in (None, 2):
        read = read_document(io.BytesIO(json.dumps(doc, indent=indent).encode()), "json", "d")
        assert [(r.field, r.reason) for r in read.rejects] == [("priority", "number out of range: 1e+300")], indent
        assert read.count() == len(doc["jobs"]) - 1


def test_a_count_past_int64_costs_its_record_not_the_read() -> None:
    """2**63 passed a check against float(2**63 - 1), which rounds to 2**63, and then failed the Int64 column."""
    doc = json.loads((CASES / "mixed_24_11.json").read_text())
    doc["jobs"][0]["restart_cnt"] = 2**63
    doc["jobs"][0]["comment"] = {"job": float("nan")}  # read alone, through Python's json, as the property test did
    doc["jobs"][1]["restart_cnt"] = 2**16 - 1  # Slurm's largest count (a uint16)
    read = read_document(io.BytesIO(json.dumps(doc).encode()), "json", "d")
    assert [r.field for r in read.rejects] == ["restart_cnt"]
    assert read.count() == len(doc["jobs"]) - 1


def test_a_member_name_that_is_not_unicode_costs_nothing() -> None:
    """NaN sends a record to Python's json, which reads "\\ud800" as half a
    surrogate pair; msgspec refuses such a name when it builds the record."""
    doc = json.loads((CASES / "mixed_23_11.json").read_text())
    doc["jobs"][0]["comment"] = {"job": float("nan")}
    doc["jobs"][0]["\ud800"] = {"\udc00": 1}
    doc["jobs"][0]["state"]["\ud800"] = 1
    # the requested TRES list is read apart from the rest of the record (the GPUs asked for, when none is held)
    doc["jobs"][1]["comment"] = {"job": float("nan")}
    asked = [{"type": "gres", "name": "gpu", "count": 2}, {"\ud800": None}]
    doc["jobs"][1]["tres"] = {"allocated": [], "requested": asked}
    read = read_document(io.BytesIO(json.dumps(doc).encode()), "json", "d")
    assert not read.rejects and read.count() == len(doc["jobs"])


def test_text_and_json_count_gpus_alike() -> None:
    """One GPU count for both formats: negative counts are no GPUs, the
    untyped count wins over typed ones, a sum past an INTEGER is refused."""
    fields = ["1234", "1234", "low", "normal", "acct", "alice", "RUNNING", "None", "10", "1796243261",
              "1796243261", "1796243265", "0", "", "gres/gpu=2", "node1", "n"]
    record = json.loads((CASES / "mixed_23_11.json").read_text())["jobs"][1]
    for tres, gpus in (("gres/gpu=-2", 2), ("gres/gpu:a=-1,gres/gpu:b=3", 3), ("gres/gpu:a=3000000000,gres/gpu=1", 1),
                       ("gres/gpu:a=2147483647,gres/gpu:b=1", None)):
        fields[13] = tres
        items = [{"type": "gres", "name": part.split("=")[0][5:], "count": int(part.split("=")[1])}
                 for part in tres.split(",")]
        record["tres"] = {"allocated": items, "requested": [{"type": "gres", "name": "gpu", "count": 2}]}
        if gpus is None:
            with pytest.raises(slurm_sacct.RecordError, match="GPU count out of range"):
                slurm_sacct.parse_text_record("|".join(fields))
            with pytest.raises(slurm_sacct.RecordError, match="GPU count out of range"):
                parse_json_record(record)
        else:
            assert slurm_sacct.parse_text_record("|".join(fields)).gpus == parse_json_record(record).gpus == gpus


def test_quarantine_shows_the_whole_record_not_only_what_the_parser_reads() -> None:
    doc = json.loads((CASES / "mixed_23_11.json").read_text())
    doc["jobs"][2]["time"]["start"] = "soon"
    doc["jobs"][2]["comment"] = {"job": "kept for the operator"}
    read = read_document(io.BytesIO(json.dumps(doc, indent=2).encode()), "json", "d")
    bad = [r for r in read.rejects if r.field == "time.start"]
    assert len(bad) == 1
    assert json.loads(bad[0].raw) == doc["jobs"][2]


def test_sacct_file_nothing_readable_fails_after_quarantining(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": [{"job_id": 1, "state": 7}]}')
    collector = SlurmCollector(Options(cluster="c1", sacct_file=str(bad), read_policy=False))
    wh = Warehouse(":memory:")
    with pytest.raises(SourceError, match=r"nothing could be read from .*bad\.json"):
        for batch in collector.batches({}):
            wh.load_batch(batch)
    assert wh.query("SELECT field FROM quarantine")["field"].to_list() == ["state"]


# -- slurmctld log ------------------------------------------------------------


def test_log_variants() -> None:
    read = read_log(CASES / "ctld_variants.log", None, zone_of("UTC"))
    got = [(lk.victim, lk.time.isoformat(), lk.preemptor, lk.reason) for lk in read.links]
    assert got == [
        ("191", "2026-11-02T08:06:00+00:00", "192", "requeued"),
        ("150", "2026-11-02T10:00:00.120000+00:00", "200", "requeued"),
        ("160_7", "2026-11-02T10:00:01.500000+00:00", "201", "requeued"),
        ("180+1", "2026-11-02T10:00:02.250000+00:00", "1234_5", "killed"),
        ("190", "2026-11-02T10:05:00+00:00", None, "killed"),
    ]
    assert [(rec, why) for rec, why, _ in read.bad] == [("ctld_variants.log:9", "Invalid isoformat string: 'garbage'")]


def test_log_local_time_zone() -> None:
    read = read_log(CASES / "ctld_variants.log", None, zone_of("Europe/Berlin"))
    times = {lk.victim: lk.time.isoformat() for lk in read.links}
    assert times["150"] == "2026-11-02T09:00:00.120000+00:00"
    assert times["191"] == "2026-11-02T08:06:00+00:00"  # an explicit offset wins


def test_log_is_read_incrementally_across_rotation(tmp_path: Path) -> None:
    path = tmp_path / "slurmctld.log"
    line = "[2026-11-02T10:00:0{i}.000] preempted JobId={i} has been requeued to reclaim resources for JobId=9{i}\n"
    path.write_text(line.format(i=1) + line.format(i=2)[:20])  # the second line is still being written
    first = read_log(path, None, zone_of("UTC"))
    assert [lk.victim for lk in first.links] == ["1"]
    with path.open("a") as f:
        f.write(line.format(i=2)[20:] + line.format(i=3))
    second = read_log(path, first.cursor, zone_of("UTC"))
    assert [lk.victim for lk in second.links] == ["2", "3"]
    # logrotate: the file is renamed and one more line lands in it, then a new file starts.
    with path.open("a") as f:
        f.write(line.format(i=4))
    os.rename(path, tmp_path / "slurmctld.log.1")
    path.write_text(line.format(i=5))
    third = read_log(path, LogCursor.load(second.cursor.dump()), zone_of("UTC"))
    assert [lk.victim for lk in third.links] == ["4", "5"]
    assert read_log(path, third.cursor, zone_of("UTC")).links == []
    # copytruncate: same file, shorter than the cursor: read from its start.
    path.write_text(line.format(i=6))
    assert [lk.victim for lk in read_log(path, third.cursor, zone_of("UTC")).links] == ["6"]


# -- partitions and QOS ---------------------------------------------------------


def test_policy_from_scontrol_and_sacctmgr() -> None:
    parts = parse_partitions(
        "PartitionName=low AllowGroups=ALL PriorityTier=1 PreemptMode=REQUEUE State=UP\n"
        "PartitionName=mid PriorityTier=5 PreemptMode=REQUEUE\n"
        "PartitionName=high PriorityTier=10 PreemptMode=OFF State=UP\n"
    )
    assert preempt_type_from_config("PreemptMode             = REQUEUE\nPreemptType             = "
                                    "preempt/partition_prio\n") == ("partition_prio", "REQUEUE")
    policy = Policy(preempt_type="partition_prio", global_mode="REQUEUE", partitions=parts,
                    tiers={"mid": "critical"}, preemptible_override={"low": False})
    assert [policy.tier(p) for p in ("low", "mid", "high", "other")] == ["low", "critical", "high", "normal"]
    assert policy.preemptible("mid", "critical") is True  # a higher tier exists and mode is REQUEUE
    assert policy.preemptible("high", "high") is False
    assert policy.preemptible("low", "low") is False  # config wins
    qos = parse_qos("normal|||\nscavenger||REQUEUE\nurgent|normal,scavenger|cluster\n")
    assert qos["urgent"] == Qos("urgent", ("normal", "scavenger"), None)
    qpolicy = Policy(preempt_type="qos", global_mode="REQUEUE", qos=qos)
    assert qpolicy.priority_class("gpu", "scavenger") == "scavenger"
    assert [qpolicy.tier(q) for q in ("urgent", "scavenger", "normal")] == ["high", "low", "low"]
    assert qpolicy.preemptible("urgent", "high") is False
    assert qpolicy.preemptible("scavenger", "low") is True


def _collect(path: Path, cluster: str = "", **options: Any) -> Warehouse:
    collector = SlurmCollector(Options(cluster, sacct_file=str(path), read_policy=False, **options))
    wh = Warehouse(":memory:")
    for batch in collector.batches({}):
        wh.load_batch(batch)
    return wh


def test_a_recorded_json_document_is_named_by_its_records_cluster(tmp_path: Path) -> None:
    """requeued_job_22_05.json is real `sacct --json` of the local Slurm (ClusterName=plens): without
    cluster.name its rows carry the records' own `cluster`; cluster.name, when set, still wins."""
    wh = _collect(CASES / "requeued_job_22_05.json")
    assert wh.query("SELECT DISTINCT cluster FROM job_runs UNION SELECT DISTINCT cluster FROM jobs")["cluster"] \
        .to_list() == ["plens"]
    named = _collect(CASES / "requeued_job_22_05.json", cluster="gpu-east")
    assert named.query("SELECT DISTINCT cluster FROM job_runs")["cluster"].to_list() == ["gpu-east"]
    # `sacct -M plens,other --json` lists each cluster's records, each naming its own (here: the same real
    # records, a second time under another cluster's name): one cluster's rows each, and no job mixed up.
    doc = json.loads((CASES / "requeued_job_22_05.json").read_text())
    doc["jobs"] += [{**job, "cluster": "other"} for job in doc["jobs"]]
    both = tmp_path / "two_clusters.json"
    both.write_text(json.dumps(doc))
    counts = _collect(both).query("SELECT cluster, count(*) AS runs FROM job_runs GROUP BY ALL ORDER BY 1").rows()
    single = _collect(CASES / "requeued_job_22_05.json").query("SELECT count(*) FROM job_runs").item()
    assert counts == [("other", single), ("plens", single)]


def test_a_document_naming_no_cluster_still_needs_cluster_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cluster.name is not set, and 7 record\(s\) of .*requeued_job_22_05.txt "
                       r"name no cluster .*parsable2"):
        _collect(CASES / "requeued_job_22_05.txt", format="parsable2")
    doc = json.loads((CASES / "requeued_job_22_05.json").read_text())
    doc["jobs"] += [{**job, "cluster": "other"} for job in doc["jobs"]]
    both = tmp_path / "two_clusters.json"
    both.write_text(json.dumps(doc))
    log = CASES / "requeued_job_22_05.slurmctld.log"
    with pytest.raises(ConfigError, match="holds records of clusters other, plens: whose is the slurmctld log"):
        _collect(both, ctld_log=str(log))
    # One cluster: its slurmctld log is that cluster's too.
    wh = _collect(CASES / "requeued_job_22_05.json", ctld_log=str(log))
    assert set(wh.query("SELECT DISTINCT cluster FROM preemption_links")["cluster"].to_list()) == {"plens"}
