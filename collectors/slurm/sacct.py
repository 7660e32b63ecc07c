"""Reading `sacct` output: JSON of every version shape, or --parsable2 text.

One accounting record is one run of a job. `parse_json_record` and
`parse_text_record` turn one record into a `SacctRecord` or raise
`RecordError` naming the field; nothing here knows about the warehouse.

JSON shapes (../shared/reference/SCHEDULERS.md):
- 22.05 (openapi/dbv0.0.38): state.current a string, numbers plain ints.
- 23.02 (data_parser/v0.0.39): numbers as {"set", "infinite", "number"}.
- 23.11 (v0.0.40): state.current a list of base state and flags.
- 24.11+ (v0.0.42+): adds restart_cnt (the job's restarts before this run, as slurmctld counts them) and qosreq
  (time.planned came in 24.05's v0.0.41, which has no restart_cnt). preempt_time and preemptable_time are in no
  accounting record of any version, only in slurmctld's live job record (squeue --json, scontrol show job: the
  JOB_INFO parser of src/plugins/data_parser/v0.0.41-v0.0.45/parsers.c, slurm-24-05-8-1 to slurm-26-05-3-1).
Every numeric field is read through `_number`, so a field that changes from
an int to the object form in a later version is read either way.

`iter_json_records` streams the `jobs` array of a document from bytes: a
200,000-job document is never held whole, nor as a list of parsed objects.
msgspec finds where each record ends and decodes it into a `Job`, the one
record type, holding only the members the parser reads (steps, exit codes,
comments... are skipped at C speed); Python's json takes over for what
msgspec refuses (NaN, broken input), and its record becomes a `Job` too.
"""

from __future__ import annotations

import gc
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any, NamedTuple

import msgspec

from preemptlens.collectors.slurm.policy import slurm_duration_s
from preemptlens.contract import RecordError

# Base states in accounting records and the contract run state each ends in.
BASE_STATES: dict[str, str] = {
    "PENDING": "pending",
    "RUNNING": "running",
    "SUSPENDED": "running",  # a suspended job keeps its GPUs: the run goes on
    "COMPLETING": "running",
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "FAILED": "failed",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "NODE_FAIL": "node_fail",
    "PREEMPTED": "preempted",
    "BOOT_FAIL": "failed",
    "OUT_OF_MEMORY": "failed",
    "REQUEUED": "requeued",
    "REQUEUE_FED": "requeued",
    "REQUEUE_HOLD": "requeued",
    "RESIZING": "running",
    "REVOKED": "cancelled",
    "SPECIAL_EXIT": "failed",
}
# 23.11+ flags that may accompany a base state; they do not change the outcome.
FLAGS = frozenset(
    {
        "LAUNCH_FAILED", "UPDATE_DB", "SIGNALING", "CONFIGURING", "POWER_UP_NODE", "STAGE_OUT",
        "STOPPED", "RECONFIG_FAIL", "RESV_DEL_HOLD", "CRON", "EXPEDITING",
    }
)

# Text-mode fields, in the order requested; the name goes last because a job
# name may itself contain the `|` separator. JobIDRaw is an array task's own
# numeric id (its alias, as `_alias` reads it from JSON).
TEXT_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "Partition", "QOS", "Account", "User", "Timelimit", "State", "Reason", "Priority",
    "Submit", "Eligible", "Start", "End", "AllocTRES", "ReqTRES", "NodeList", "JobName",
)
# The fields requested before Timelimit, and before JobIDRaw: documents recorded with them still read.
PREVIOUS_TEXT_FIELDS: tuple[str, ...] = tuple(f for f in TEXT_FIELDS if f != "Timelimit")
OLD_TEXT_FIELDS: tuple[str, ...] = tuple(f for f in PREVIOUS_TEXT_FIELDS if f != "JobIDRaw")
# A job's time limit as sacct states it (src/sacct/print.c, PRINT_TIMELIMIT, slurm-22-05-11-1): "UNLIMITED" for
# INFINITE, "Partition_Limit" for NO_VAL (the job set none: its partition's DefaultTime, else MaxTime, applies),
# else [days-]hh:mm:ss. In JSON, `time.limit` in minutes: a plain int in 22.05 (INFINITE 0xffffffff, NO_VAL
# 0xfffffffe), {"set", "infinite", "number"} from 23.02 (data_parser UINT32_NO_VAL: not set is NO_VAL).
# A record's `time_limit_s` is seconds, inf when unlimited, PARTITION_LIMIT when the partition's applies,
# None when the record states none.
PARTITION_LIMIT = -1.0
_INFINITE32, _NO_VAL32 = 0xFFFFFFFF, 0xFFFFFFFE
_UNSET_TIMES = ("", "Unknown", "None", "0")
_LAST_EPOCH = 32503680000  # year 3000: a later "time" is a garbled value
# An Int64 column's range (restart counts, ids): below 2**63, a float held exactly (float(2**63 - 1) is 2**63).
_INT64_END = float(2**63)
_MAX_COUNT = 2**31 - 1  # an INTEGER column's range (GPUs)
_EXACT = 2**53  # ints a float holds exactly
# Slurm counts a job's restarts in a uint16 (slurmdb_job_rec_t.restart_cnt, slurm/slurmdb.h of slurm-24-11-0-1).
_MAX_RESTARTS = 2**16 - 1
_NO_NODES = ("", "None assigned", "(null)")


class DocumentError(ValueError):
    """The document itself is broken (truncated, not JSON): records after
    `offset` cannot be read."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"at byte {offset}: {reason}")
        self.offset = offset
        self.reason = reason


class SacctRecord(NamedTuple):
    """One run as read. A tuple of plain values, so the garbage collector
    stops tracking it: a 200,000-record read no longer makes every
    collection walk all the records read so far."""

    job_id: str
    name: str | None
    account: str | None
    user: str | None
    partition: str | None
    qos: str | None
    priority: float | None
    state: str  # contract run state
    raw_state: str  # the source's own, flags joined with ","
    reason: str | None
    submit: int | None  # epoch seconds; None where Slurm has not set it
    eligible: int | None
    start: int | None
    end: int | None
    gpus: int
    nodes: str | None
    restart_cnt: int | None  # 24.11+ only: restarts of the job before this run (0 for its first)
    # An array task's own numeric id (its $SLURM_JOB_ID, what GPU exporters
    # label samples with) where job_id is the "<array job>_<task>" form.
    alias: str | None = None
    # Where the job worked and wrote its output (JSON only: 22.05's `working_directory`; `stdout`/`stderr`
    # from data_parser v0.0.40, with their `%j`-style patterns expanded here, or `*_expanded` where given).
    work_dir: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    # The record's own cluster (JSON's `cluster` member; --parsable2 has none).
    cluster: str | None = None
    # Who asked for the run's end, where Slurm records it (a cancel's requester): JSON's `kill_request_user`, a
    # user name (dbv0.0.38 of 22.05 on), or "uid N" from the text State "CANCELLED by N".
    ended_by: str | None = None
    # The job's time limit in seconds (inf: UNLIMITED; PARTITION_LIMIT: its partition's; None: not stated).
    time_limit_s: float | None = None


# -- the record type ----------------------------------------------------------

# What a member holds when it is not the object the parser expects: any other
# JSON value, so that decoding never fails on a member's type and the parser
# names the field (a member typed as a struct alone would fail the whole record).
_Other = list[Any] | str | int | float | bool | None


class _Number(msgspec.Struct, gc=False):
    """23.02+'s {"set", "infinite", "number"}; `_number` reads it like the dict."""

    set: Any = True
    infinite: Any = False
    number: Any = None


# A number as any version writes it (or any other value, for `_number` to name).
_Num = _Number | _Other


class _Ids(msgspec.Struct, gc=False):
    """`array` or `het`."""

    job_id: _Num = None
    task_id: _Num = None
    task: Any = None
    job_offset: _Num = None


class _State(msgspec.Struct, gc=False):
    current: Any = None
    reason: Any = None


class _Times(msgspec.Struct, gc=False):
    submission: _Num = None
    eligible: _Num = None
    start: _Num = None
    end: _Num = None
    # Unset where the record has no such member (unknown); null is 22.05's INFINITE or NO_VAL (`_limit`).
    limit: _Num | msgspec.UnsetType = msgspec.UNSET


class _TresItem(msgspec.Struct, gc=False):
    type: Any = None
    name: Any = None
    count: _Num = None


_TresList = list[_TresItem | _Other] | dict[str, Any] | str | int | float | bool | None


class _Tres(msgspec.Struct, gc=False):
    allocated: _TresList = None
    # Read only where nothing is allocated (a pending job): left as bytes
    # until then, it costs the decode no objects (see `_requested`).
    requested: msgspec.Raw = msgspec.Raw(b"null")


class Job(msgspec.Struct, gc=False):
    """The members of a job record that `parse_json_record` reads, whatever
    the version; msgspec skips the others."""

    job_id: _Num = None
    array: _Ids | _Other = None
    het: _Ids | _Other = None
    name: Any = None
    account: Any = None
    user: Any = None
    partition: Any = None
    qos: Any = None
    priority: _Num = None
    state: _State | _Other = None
    time: _Times | _Other = None
    tres: _Tres | _Other = None
    nodes: Any = None
    restart_cnt: _Num = None
    working_directory: Any = None
    stdout: Any = None
    stderr: Any = None
    stdout_expanded: Any = None
    stderr_expanded: Any = None
    cluster: Any = None
    kill_request_user: Any = None


_ANY = msgspec.json.Decoder()
# A record that is not an object decodes too: the parser names it.
_RECORD = msgspec.json.Decoder(Job | _Other)
_RUN = msgspec.json.Decoder(list[Job | _Other])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_TRES_LIST = msgspec.json.Decoder(_TresList)
_SKIP = msgspec.json.Decoder(msgspec.Raw)


def _as_job(record: Any) -> Job:
    if type(record) is Job:
        return record
    if type(record) is not dict and not isinstance(record, Mapping):
        raise RecordError("job", f"expected an object, got {_short(record)}")
    fields = dict(record)
    tres = fields.get("tres")
    requested = None
    if type(tres) is dict and "requested" in tres:
        # Held as it is (only bytes become msgspec.Raw): `_requested` reads either.
        tres = fields["tres"] = dict(tres)
        requested = tres.pop("requested")
    try:
        job = _convert(fields, Job)
    except msgspec.ValidationError as exc:  # not expected: every member takes any value
        raise RecordError("job", str(exc)) from None
    if requested is not None and type(job.tres) is _Tres:
        job.tres.requested = requested
    return job


def _convert(value: Any, into: Any) -> Any:
    """msgspec.convert of what Python's json read: a member name holding half a surrogate pair (json reads
    "\\ud800") is made valid Unicode first, as msgspec needs it; no member read has such a name."""
    try:
        return msgspec.convert(value, into)
    except UnicodeEncodeError:
        return msgspec.convert(_unicode_names(value), into)


def _unicode_names(value: Any) -> Any:
    if isinstance(value, dict):
        return {k.encode("utf-8", "surrogatepass").decode("utf-8", "replace"): _unicode_names(v)
                for k, v in value.items()}
    return [_unicode_names(v) for v in value] if isinstance(value, list) else value


def _requested(value: Any) -> Any:
    return _TRES_LIST.decode(value) if type(value) is msgspec.Raw else _convert(value, _TresList)


# -- JSON -------------------------------------------------------------------


def _number(value: Any, field: str) -> float | None:
    """A number in either shape: plain, or {"set", "infinite", "number"}; a value that is not finite
    or does not fit 64 bits is the record's error, not a crash of the read (int(inf), an Int64 column)."""
    kind = type(value)
    if kind is not int and kind is not float:  # exact types first: this runs a dozen times a record
        if value is None:
            return None
        if kind is _Number or kind is dict or isinstance(value, Mapping):
            if kind is _Number:
                given, infinite, value = value.set, value.infinite, value.number
            else:
                given, infinite, value = value.get("set", True), value.get("infinite", False), value.get("number")
            if not given or infinite:
                return None
            if value is None:
                raise RecordError(field, "number object without a number")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RecordError(field, f"expected a number, got {type(value).__name__} {_short(value)}")
    number = float(value)
    if -_INT64_END <= number < _INT64_END:  # False for NaN too
        return number
    raise RecordError(field, f"number out of range: {_short(value)}")


def _count(value: Any, field: str, most: int) -> float | None:
    """A count (either number shape) from 0 to `most`; another value is the record's error."""
    number = _number(value, field)
    if number is not None and not (0 <= number <= most and number == int(number)):
        raise RecordError(field, f"not a count from 0 to {most}: {_short(value)}")
    return number


def _epoch(value: Any, field: str) -> int | None:
    if type(value) is int and value <= _LAST_EPOCH:
        return value if value > 0 else None
    number = _number(value, field)
    if number is None or number <= 0:
        return None  # Slurm writes 0 for a time that has not happened (end of a running job)
    if number > _LAST_EPOCH:
        raise RecordError(field, f"not an epoch time: {number:g}")
    return int(number)


def _limit(value: Any, field: str) -> float | None:
    """`time.limit` (minutes, either shape) in seconds: inf for INFINITE, PARTITION_LIMIT for NO_VAL (a number
    object not set), None for none (0, or no member). 22.05 (openapi/dbv0.0.38, parse.c `_dump_to_uint32`)
    writes null for both INFINITE and NO_VAL: PARTITION_LIMIT, which the partition's own limit resolves (an
    INFINITE job limit exists only where the partition's is unlimited too)."""
    if value is msgspec.UNSET:
        return None
    if value is None:
        return PARTITION_LIMIT
    if isinstance(value, _Number | Mapping):
        given, infinite = (value.set, value.infinite) if isinstance(value, _Number) else (
            value.get("set", True), value.get("infinite", False))
        if infinite:
            return math.inf
        if not given:
            return PARTITION_LIMIT
    minutes = _number(value, field)
    if minutes is None or minutes <= 0:
        return None
    if minutes == _INFINITE32:
        return math.inf
    if minutes == _NO_VAL32:
        return PARTITION_LIMIT
    return minutes * 60.0


def text_limit(value: str, field: str = "Timelimit") -> float | None:
    """A Timelimit as sacct prints it, in seconds (see `PARTITION_LIMIT`)."""
    value = value.strip()
    if not value:
        return None
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return math.inf
    if value == "Partition_Limit":
        return PARTITION_LIMIT
    seconds = slurm_duration_s(value)
    if seconds is None:
        raise RecordError(field, f"not a time limit: {_short(value)}")
    return seconds if seconds > 0 else None


def _text(value: Any, field: str) -> str | None:
    if type(value) is str:
        return value or None
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(field, f"expected text, got {type(value).__name__} {_short(value)}")
    return value or None


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _member(value: Any, kind: type, field: str) -> Any:
    """A member that must be an object: as decoded, or RecordError."""
    if type(value) is not kind:
        raise RecordError(field, "missing" if value is None else f"expected an object, got {_short(value)}")
    return value


def run_state(tokens: list[str], field: str = "state.current") -> str:
    """Contract state of a record from its base state and flags.

    A requeue flag wins over the base state it rides on (23.11+ may print
    ["PENDING", "REQUEUED"]); PREEMPTED wins over everything, because the run
    ended by preemption whatever happens to the job next.
    """
    if len(tokens) == 1 and tokens[0] in BASE_STATES:
        return BASE_STATES[tokens[0]]  # the common case; PREEMPTED and REQUEUE* map as below
    states = [t.strip().upper() for t in tokens if t.strip()]
    if not states:
        raise RecordError(field, "no state")
    if "PREEMPTED" in states:
        return "preempted"
    if any(s.startswith("REQUEUE") for s in states):
        return "requeued"
    for s in states:
        if s in BASE_STATES:
            return BASE_STATES[s]
    unknown = [s for s in states if s not in FLAGS]
    raise RecordError(field, f"unknown state {','.join(unknown or states)}")


def _job_id(job: Job) -> tuple[str, float]:
    """The record's job id as sacct's text prints it, and its own numeric id."""
    raw, array, het = job.job_id, job.array, job.het
    if (type(raw) is int and -_EXACT < raw < _EXACT
            and (type(array) is not _Ids or (type(array.job_id) is int and array.job_id == 0))
            and (type(het) is not _Ids or (type(het.job_id) is int and het.job_id == 0))):
        return str(raw), raw  # the common case: a job of its own, neither array task nor component
    raw = _number(job.job_id, "job_id")
    if raw is None:
        raise RecordError("job_id", "missing")
    array = job.array
    if type(array) is _Ids:
        array_job = _number(array.job_id, "array.job_id")
        if array_job:
            task = _number(array.task_id, "array.task_id")
            if task is not None:
                return f"{int(array_job)}_{int(task)}", raw
            if isinstance(array.task, str) and array.task:
                # The not yet split part of a pending array, as sacct's text prints it.
                return f"{int(array_job)}_[{array.task}]", raw
    het = job.het
    if type(het) is _Ids:
        het_job = _number(het.job_id, "het.job_id")
        if het_job:
            offset = _number(het.job_offset, "het.job_offset")
            if offset is not None:
                return f"{int(het_job)}+{int(offset)}", raw
    return str(int(raw)), raw


def json_job_id(record: Any) -> str | None:
    """The job id of a record that may not read (to keep its job whole or not
    at all), or None where even that cannot be told."""
    try:
        return _job_id(_as_job(record))[0]
    except RecordError:
        return None


def _alias(job_id: str, raw: float | None) -> str | None:
    """The numeric id of a started array task ("1230_4" is job 1234 to the
    prolog) or of a heterogeneous job's component ("1233+1" is job 1234: each
    component is a job of its own, with its own cgroup and prolog); None for
    any other record."""
    if raw is None or "[" in job_id or ("_" not in job_id and "+" not in job_id):
        return None
    return str(int(raw))


def _gpus(items: Any, field: str) -> int | None:
    """GPUs in a TRES list: the untyped gres/gpu count, else the sum of typed
    ones ("gpu:a100"); None where the list names no GPU."""
    if items is None:
        return None
    if type(items) is not list:
        raise RecordError(field, f"expected a list, got {_short(items)}")
    plain: float | None = None
    typed = 0.0
    found = False
    for item in items:
        if type(item) is not _TresItem or item.type != "gres":
            continue
        name, count = item.name, item.count
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        if type(count) is not int or not 0 <= count <= _MAX_COUNT:
            count = _number(count, field)
            if count is None or count < 0:
                continue
        found = True
        if name == "gpu":
            plain = count
        else:
            typed += count
    if not found:
        return None
    count = plain if plain is not None else typed
    if count > _MAX_COUNT:
        raise RecordError(field, f"GPU count out of range: {count:g}")
    return int(count)


def _tokens(current: Any) -> list[str]:
    """The base state and flags of `state.current`."""
    if type(current) is list and len(current) == 1 and type(current[0]) is str:
        return current
    if isinstance(current, str):
        return current.split(",")
    if isinstance(current, list) and all(isinstance(t, str) for t in current):
        return list(current)
    raise RecordError("state.current", f"expected text or a list of text, got {_short(current)}")


def _texts(values: list[Any], field: str) -> list[str | None]:
    return [(v or None) if type(v) is str else _text(v, field) for v in values]


def _epochs(values: list[Any], field: str) -> list[int | None]:
    return [v if type(v) is int and 0 < v <= _LAST_EPOCH else _epoch(v, field) for v in values]


def decode_run(records: list[Any]) -> dict[str, list[Any]]:
    """The `SacctRecord` fields of a run of records (as `iter_json_records`
    yields them, or dicts), column by column: the one reading of a JSON
    record, whether of a run or of one record alone.

    RecordError names the field of a record that cannot be read. The checks
    run in the same order for each column, so for a run of one record the
    error is that record's first (a run that fails is read again a record
    at a time, to name each one)."""
    jobs = [r if type(r) is Job else _as_job(r) for r in records]
    ids = [_job_id(job) for job in jobs]
    states = [s if type(s) is _State else _member(s, _State, "state") for s in [job.state for job in jobs]]
    tokens = [_tokens(state.current) for state in states]
    decided = [BASE_STATES[t[0]] if len(t) == 1 and t[0] in BASE_STATES else run_state(t) for t in tokens]
    times = [t if type(t) is _Times else _member(t, _Times, "time") for t in [job.time for job in jobs]]
    tres = [t if type(t) is _Tres else _Tres() if t is None else _member(t, _Tres, "tres")
            for t in [job.tres for job in jobs]]
    gpus = [_gpus(t.allocated, "tres.allocated") for t in tres]
    gpus = [_gpus(_requested(t.requested), "tres.requested") if g is None else g
            for g, t in zip(gpus, tres, strict=True)]
    restarts = [None if r is None else _count(r, "restart_cnt", _MAX_RESTARTS)
                for r in [job.restart_cnt for job in jobs]]
    return {
        "job_id": [job_id for job_id, _ in ids],
        "name": _texts([job.name for job in jobs], "name"),
        "account": _texts([job.account for job in jobs], "account"),
        "user": _texts([job.user for job in jobs], "user"),
        "partition": _texts([job.partition for job in jobs], "partition"),
        "qos": _texts([job.qos for job in jobs], "qos"),
        "priority": [_number(job.priority, "priority") for job in jobs],
        "state": decided,
        "raw_state": [t[0] if len(t) == 1 else ",".join(t) for t in tokens],
        "reason": [None if r == "None" else r for r in _texts([state.reason for state in states], "state.reason")],
        "submit": _epochs([t.submission for t in times], "time.submission"),
        "eligible": _epochs([t.eligible for t in times], "time.eligible"),
        "start": _epochs([t.start for t in times], "time.start"),
        "end": _epochs([t.end for t in times], "time.end"),
        "gpus": [g or 0 for g in gpus],
        "nodes": [None if n in _NO_NODES else n for n in _texts([job.nodes for job in jobs], "nodes")],
        "restart_cnt": [None if r is None else int(r) for r in restarts],
        "alias": [None if "_" not in job_id and "+" not in job_id else _alias(job_id, raw) for job_id, raw in ids],
        "work_dir": _texts([job.working_directory for job in jobs], "working_directory"),
        "stdout": [_output(job, "stdout", job_id, raw) for job, (job_id, raw) in zip(jobs, ids, strict=True)],
        "stderr": [_output(job, "stderr", job_id, raw) for job, (job_id, raw) in zip(jobs, ids, strict=True)],
        "cluster": _texts([job.cluster for job in jobs], "cluster"),
        "ended_by": _texts([job.kill_request_user for job in jobs], "kill_request_user"),
        "time_limit_s": [_limit(t.limit, "time.limit") for t in times],
    }


# sbatch's filename patterns (man sbatch, "filename pattern"): an optional zero-padding width, then the letter.
_PATTERN = re.compile(r"%(\d*)(.)")


def _output(job: Job, stream: str, job_id: str, raw: float) -> str | None:
    """A job's output path with its filename pattern filled in, None where it holds one that cannot be
    (a node name, a step id: a file per node or step, not the job's one log)."""
    expanded = _text(getattr(job, f"{stream}_expanded"), f"{stream}_expanded")
    if expanded:
        return expanded
    pattern = _text(getattr(job, stream), stream)
    if not pattern:
        return None
    array, _, task = job_id.partition("_")
    values = {"j": str(int(raw)), "A": array if task else str(int(raw)), "a": task or "4294967294",
              "u": _text(job.user, "user") or "", "x": _text(job.name, "name") or ""}
    missing = False

    def fill(m: re.Match[str]) -> str:
        nonlocal missing
        if m.group(2) == "%":
            return "%"
        value = values.get(m.group(2))
        if value is None:
            missing = True
            return m.group(0)
        return value.zfill(int(m.group(1))) if m.group(1) and value.isdigit() else value

    path = _PATTERN.sub(fill, pattern)
    return None if missing else path


def parse_json_record(record: Any) -> SacctRecord:
    """One record (as `iter_json_records` yields it, or a dict) as a run of one."""
    return SacctRecord(*(column[0] for column in decode_run([record]).values()))


def _reason(reason: str | None) -> str | None:
    return None if reason in (None, "None") else reason


def _nodes(nodes: str | None) -> str | None:
    return None if nodes is None or nodes in _NO_NODES else nodes


# Bytes that may separate JSON tokens.
_WS = frozenset(b" \t\r\n")
# Longest single value (a job record) the reader waits for before calling it broken.
_MAX_VALUE = 1 << 20
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


# Bytes of records decoded per msgspec call: large enough that the per-call
# work is spread over thousands of records, small enough to stay a fraction
# of the 1 GiB budget.
_RUN_BYTES = 8 << 20
# Ends tried per run before reading it record by record.
_RUN_TRIES = 4


class _Reader:
    """Incremental reading of one JSON document of bytes.

    The buffer holds the byte before pos (or the start of its line), the
    unread tail and at most one chunk (one run of records, when `run`
    reads); a value that straddles the end of the buffer is retried after
    the next chunk arrives. Each value's end is found by msgspec at C speed;
    values msgspec refuses but Python's json accepts (NaN, Infinity) go
    through `json` instead.
    """

    def __init__(self, stream: IO[str] | IO[bytes], chunk: int) -> None:
        self.stream = stream
        self.chunk = chunk
        # A bytearray once `fill` has built it, so that `run` can frame a run
        # in place. Replaced, never resized.
        self.buf: bytes | bytearray = b""
        self.pos = 0
        self.consumed = 0  # bytes dropped from the front of buf
        self.eof = False
        self.decoder = json.JSONDecoder()

    def offset(self) -> int:
        return self.consumed + self.pos

    def _keep(self) -> int:
        """Where the buffer may start: the byte before pos, or the line
        start before it when near (a record's indent is read from its
        line, see `_indent`)."""
        keep = max(self.pos - 1, 0)
        line = self.buf.rfind(b"\n", max(keep - 256, 0), keep + 1)
        return keep if line < 0 else line

    def _more(self) -> bool:
        if self.eof:
            return False
        data = self.stream.read(self.chunk)
        if not data:
            self.eof = True
            return False
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        keep = self._keep()
        self.consumed += keep
        self.buf = self.buf[keep:] + data
        self.pos -= keep
        return True

    def fill(self, size: int) -> None:
        """Read until `size` unread bytes are buffered (or the stream ends)
        into a new bytearray, joining the chunks once instead of copying the
        buffer per chunk."""
        keep = self._keep()
        parts = [self.buf[keep:]]
        have = len(parts[0]) - (self.pos - keep)
        while have < size and not self.eof:
            data = self.stream.read(self.chunk)
            if not data:
                self.eof = True
                break
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogatepass")
            parts.append(data)
            have += len(data)
        if len(parts) > 1 or type(self.buf) is not bytearray:
            self.consumed += keep
            self.buf = bytearray().join(parts)
            self.pos -= keep

    def run(self) -> tuple[list[Any] | None, Callable[[int], bytes], int]:
        """The run of whole records that starts at pos, decoded in one call.

        Returns the records, how to get the bytes of the k-th (for a
        quarantine message: found again only then) and where the run ends;
        or None and the end of the span that must be read record by record
        (no run starts here, or its end could not be found).

        A record that starts a line ends at a line holding only its indent
        and "}": JSON strings hold no raw line breaks, and a span that
        decodes as a list ends at a record boundary whatever the layout, so
        the layout only decides how fast, never what is read.
        """
        self.peek()
        indent = self._indent() if self.buf[self.pos : self.pos + 1] == b"{" else None
        if indent is None:
            return None, _no_bytes, self.pos
        self.fill(_RUN_BYTES)
        buf, start = self.buf, self.pos - 1
        if start < 0 or not isinstance(buf, bytearray):
            return None, _no_bytes, self.pos  # only at the document's first byte, where no record starts
        closing = b"\n" + indent + b"}"
        limit = len(buf) - 1  # the byte after a run's end is overwritten below: it must be in the buffer
        for _ in range(_RUN_TRIES):
            close = buf.rfind(closing, self.pos, limit)
            if close < 0:
                return None, _no_bytes, self.pos
            end = close + len(closing)
            # The run framed as a JSON array in place, by the byte before it
            # and the one after it (space, comma or bracket), put back after
            # the decode: no copy of the run.
            before, after = buf[start], buf[end]
            buf[start], buf[end] = ord("["), ord("]")
            # Cyclic collections, triggered by the count of objects a run
            # makes (none in a cycle), would cost a fifth of the decode.
            collecting = gc.isenabled()
            gc.disable()
            try:
                records = _RUN.decode(memoryview(buf)[start : end + 1])
            except msgspec.DecodeError:
                # The closing line of something after the array (meta holds
                # objects at a record's indent), or a broken record: try an
                # earlier end, then leave it to the record-by-record reader.
                limit = close
                continue
            finally:
                buf[start], buf[end] = before, after
                if collecting:
                    gc.enable()
            return records, _bytes_in(memoryview(buf)[self.pos : end]), end
        return None, _no_bytes, limit

    def peek(self) -> str:
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < len(buf):
                return chr(buf[pos])
            if not self._more():
                return ""

    def expect(self, char: str) -> None:
        got = self.peek()
        if got != char:
            raise DocumentError(self.offset(), f"expected {char!r}, found {got!r}" if got else
                                f"expected {char!r}, the document ends (truncated?)")
        self.pos += 1

    def _indent(self) -> bytes | None:
        """The whitespace before the value at pos on its line, if the value
        starts a line: a pretty-printed object then ends at the first line
        holding only that indent and "}"."""
        line = self.buf.rfind(b"\n", 0, self.pos) + 1
        if line == 0 and self.consumed:
            return None
        indent = bytes(self.buf[line : self.pos])
        return indent if not indent.strip() else None

    def record(self) -> tuple[Any, bytes]:
        """The next job record, decoded as a `Job` (or as the other value it
        is), and its bytes."""
        self.peek()
        span = self._span()
        if span is not None:
            raw = bytes(self.buf[self.pos : span])
            try:
                value = _RECORD.decode(raw)
            except msgspec.DecodeError:
                pass  # msgspec's end was not the value's end: Python's json finds it
            else:
                self.pos = span
                return value, raw
        start = self.offset()
        value = self._json_value()
        return value, bytes(self.buf[start - self.consumed : self.pos])

    def _span(self) -> int | None:
        """Where the value at pos ends, found by msgspec skipping over it at
        C speed; None for a value only Python's json reads (or a broken one)."""
        while True:
            try:
                _SKIP.decode(memoryview(self.buf)[self.pos :])
                end = len(self.buf)
            except msgspec.DecodeError as exc:
                message = str(exc)
                trailing = _TRAILING.search(message)
                if trailing is None:
                    if "truncated" in message and self._more():
                        continue
                    return None
                end = self.pos + int(trailing.group(1)) - 1  # msgspec counts the trailing byte itself
            if end == len(self.buf) and not self.eof and self._more():
                continue  # a number at the buffer's end may go on in the next chunk
            return end

    def value(self) -> Any:
        """The next value whole."""
        self.peek()
        end = self._span()
        if end is None:
            return self._json_value()
        try:
            value = _ANY.decode(self.buf[self.pos : end])
        except msgspec.DecodeError:
            return self._json_value()
        self.pos = end
        return value

    def _json_value(self) -> Any:
        """Python's json for what msgspec refuses: NaN and Infinity, or broken JSON.

        It reads text, so it gets a window of the buffer that doubles until
        the value fits, not the whole buffer for every such value."""
        last_error: int | None = None
        window = 1 << 16
        while True:
            text = self.buf[self.pos : self.pos + window].decode("utf-8", "surrogateescape")
            windowed = self.pos + window < len(self.buf)
            try:
                value, end = self.decoder.raw_decode(text)
            except json.JSONDecodeError as exc:
                if windowed:
                    window *= 2
                    continue
                where = self.offset() + len(text[: exc.pos].encode("utf-8", "surrogateescape"))
                # An error that stays at one place while a megabyte more arrives
                # is a broken value, not a short read: stop instead of
                # buffering the rest of the document.
                settled = where == last_error and len(text) - exc.pos > _MAX_VALUE
                if not settled and self._more():
                    last_error = where
                    continue
                hint = " (the document ends: truncated?)" if self.eof and exc.pos >= len(text) - 1 else ""
                raise DocumentError(where, f"not valid JSON: {exc.msg}{hint}") from None
            if end == len(text) and isinstance(value, int | float):
                # A number at the text's end may go on past it.
                if windowed:
                    window *= 2
                    continue
                if not self.eof and self._more():
                    continue
            start = self.pos
            self.pos += len(text[:end].encode("utf-8", "surrogateescape"))
            # Bytes that are not UTF-8 become U+FFFD, as a text-mode read would make them.
            return self.decoder.decode(self.buf[start : self.pos].decode("utf-8", "replace"))


def iter_json_records(stream: IO[str] | IO[bytes], meta: dict[str, Any] | None = None,
                      chunk: int = 1 << 20) -> Iterator[tuple[list[Any], Callable[[int], bytes]]]:
    """Yield the elements of the document's top-level `jobs` array, in runs
    decoded together, each run with how to get the bytes of its k-th element.

    An element that is an object comes as a `Job`, holding only the members
    `parse_json_record` reads (as a dict where only Python's json reads it);
    the bytes are for a quarantine message that shows it all (ask for them
    before the next run). Other top-level members (meta, errors, warnings)
    are small and stored in `meta` when given; a broken document raises
    DocumentError after every element before the break was yielded.
    """
    reader = _Reader(stream, chunk)
    reader.expect("{")
    if reader.peek() == "}":
        return
    while True:
        key = reader.value()
        if not isinstance(key, str):
            raise DocumentError(reader.offset(), "expected a member name")
        reader.expect(":")
        if key == "jobs":
            reader.expect("[")
            if reader.peek() == "]":
                reader.pos += 1
            else:
                yield from _iter_array(reader)
        else:
            value = reader.value()
            if meta is not None:
                meta[key] = value
        sep = reader.peek()
        if sep == "}":
            return
        reader.expect(",")


def _iter_array(reader: _Reader) -> Iterator[tuple[list[Any], Callable[[int], bytes]]]:
    slow_until = 0  # offset up to which records are read one by one
    while True:
        records = None
        if reader.offset() >= slow_until:
            records, bytes_of, end = reader.run()
            slow_until = reader.consumed + end
            if records is not None:
                reader.pos = end
        if records is None:
            value, raw = reader.record()
            records, bytes_of = [value], _given(raw)
        yield records, bytes_of
        if reader.peek() == "]":
            reader.pos += 1
            return
        reader.expect(",")


def _no_bytes(k: int) -> bytes:
    raise IndexError(k)


def _given(raw: bytes) -> Callable[[int], bytes]:
    return lambda _: raw


def _bytes_in(run: memoryview) -> Callable[[int], bytes]:
    """The bytes of a run's k-th record, found when asked for (a record
    failed): the run is not copied or split for the records that read."""
    return lambda k: bytes(_RAWS.decode(b"[" + bytes(run) + b"]")[k])


def iter_json_jobs(stream: IO[str] | IO[bytes], meta: dict[str, Any] | None = None,
                   chunk: int = 1 << 20) -> Iterator[Any]:
    """Each element of the `jobs` array whole (`iter_json_records` without the trimming)."""
    for records, bytes_of in iter_json_records(stream, meta, chunk):
        for k in range(len(records)):
            yield whole_record(bytes_of(k))


def whole_record(raw: bytes) -> Any:
    """Every member of a record `iter_json_records` yielded, from its bytes."""
    try:
        return _ANY.decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw.decode("utf-8", "replace"))


def version_of(meta: Mapping[str, Any]) -> str | None:
    """The data format the document declares (for messages only: records
    are read by their own shape, whatever the meta says)."""
    m = meta.get("meta")
    if not isinstance(m, Mapping):
        return None
    for holder in ("plugin", "plugins"):
        plugin = m.get(holder)
        if isinstance(plugin, Mapping):
            for key in ("data_parser", "type"):
                if isinstance(plugin.get(key), str) and plugin[key]:
                    return str(plugin[key])
    return None


# -- --parsable2 text ---------------------------------------------------------


def text_format_arg() -> str:
    return "--format=" + ",".join(TEXT_FIELDS)


def _text_tres(tres: str, field: str) -> list[_TresItem]:
    """The GPU items of an AllocTRES or ReqTRES value ("gres/gpu:a100=2,...")."""
    items = []
    for part in tres.split(","):
        if not part:
            continue
        name, sep, count = part.partition("=")
        if not sep:
            raise RecordError(field, f"not name=count: {_short(part)}")
        if name == "gres/gpu" or name.startswith("gres/gpu:"):
            try:
                items.append(_TresItem("gres", name[5:], int(count)))
            except ValueError:
                raise RecordError(field, f"GPU count is not a number: {_short(part)}") from None
    return items


def _text_number(value: str, field: str) -> float | None:
    try:
        number = float(value) if value.strip() else None
    except ValueError:
        raise RecordError(field, f"not a number: {_short(value)}") from None
    return None if number is None else _number(number, field)


def _text_time(value: str, field: str) -> int | None:
    """Times as SLURM_TIME_FORMAT=%s prints them (epoch seconds)."""
    value = value.strip()
    if value in _UNSET_TIMES:
        return None
    try:
        number = int(value)
    except ValueError:
        raise RecordError(field, f"not an epoch time (is SLURM_TIME_FORMAT=%s set?): {_short(value)}") from None
    return _epoch(number, field)


def _text_fields(line: str) -> tuple[tuple[str, ...], list[str]]:
    """The field list a line was written with, and its fields.

    The field count cannot tell: the name, last, may hold `|`. A line of
    `TEXT_FIELDS` or `PREVIOUS_TEXT_FIELDS` has a number second (JobIDRaw; the
    partition there in `OLD_TEXT_FIELDS`) and a state word where its list has
    State (the other lists have the time limit or the reason there)."""
    for fields in (TEXT_FIELDS, PREVIOUS_TEXT_FIELDS):
        parts = line.split("|", len(fields) - 1)
        if (len(parts) == len(fields) and parts[1].strip().isascii() and parts[1].strip().isdecimal()
                and parts[fields.index("State")].split(" ")[0] in BASE_STATES):
            return fields, parts
    return OLD_TEXT_FIELDS, line.split("|", len(OLD_TEXT_FIELDS) - 1)


def is_text_header(line: str) -> bool:
    """The header line sacct prints without --noheader (a recorded document may hold one)."""
    return line.split("|", 1)[0].strip() == "JobID"


def parse_text_record(line: str) -> SacctRecord:
    """One `sacct --parsable2 --noheader` line in `TEXT_FIELDS` order, or in the
    order of a list recorded before (`PREVIOUS_TEXT_FIELDS`, `OLD_TEXT_FIELDS`)."""
    fields, parts = _text_fields(line.rstrip("\n"))
    if len(parts) != len(fields):
        raise RecordError("line", f"expected {len(fields)} fields, got {len(parts)}")
    f = dict(zip(fields, parts, strict=True))
    job_id = f["JobID"].strip()
    if not job_id or not "0" <= job_id[0] <= "9":
        raise RecordError("JobID", f"not a job id: {_short(job_id)}")
    # "CANCELLED by 0": the state word comes first, the uid of who asked for the end last.
    state_word, *by = f["State"].split(" ")
    ended_by = f"uid {by[1]}" if len(by) == 2 and by[0] == "by" and by[1].isdecimal() else None
    priority: float | None = None
    if f["Priority"].strip():
        try:
            priority = float(f["Priority"])
        except ValueError:
            raise RecordError("Priority", f"not a number: {_short(f['Priority'])}") from None
    gpus = _gpus(_text_tres(f["AllocTRES"], "AllocTRES"), "AllocTRES")
    if gpus is None:
        gpus = _gpus(_text_tres(f["ReqTRES"], "ReqTRES"), "ReqTRES")
    return SacctRecord(
        job_id=job_id,
        name=f["JobName"] or None,
        account=f["Account"] or None,
        user=f["User"] or None,
        partition=f["Partition"] or None,
        qos=f["QOS"] or None,
        priority=priority,
        state=run_state([state_word], "State"),
        raw_state=state_word,
        reason=_reason(f["Reason"] or None),
        submit=_text_time(f["Submit"], "Submit"),
        eligible=_text_time(f["Eligible"], "Eligible"),
        start=_text_time(f["Start"], "Start"),
        end=_text_time(f["End"], "End"),
        gpus=gpus or 0,
        nodes=_nodes(f["NodeList"]),
        restart_cnt=None,
        alias=_alias(job_id, _text_number(f["JobIDRaw"], "JobIDRaw") if "JobIDRaw" in f else None),
        ended_by=ended_by,
        time_limit_s=text_limit(f["Timelimit"]) if "Timelimit" in f else None,
    )
