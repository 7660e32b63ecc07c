"""Reading `sacct` output: JSON of every version shape, or --parsable2 text.

One accounting record is one run of a job. `parse_json_record` and
`parse_text_record` turn one record into a `SacctRecord` or raise
`RecordError` naming the field; nothing here knows about the warehouse.

JSON shapes (../shared/reference/SCHEDULERS.md):
- 22.05 (openapi/dbv0.0.38): state.current a string, numbers plain ints.
- 23.02 (data_parser/v0.0.39): numbers as {"set", "infinite", "number"}.
- 23.11 (v0.0.40): state.current a list of base state and flags.
- 24.11+ (v0.0.42+): adds restart_cnt, qosreq, time.planned.
Every numeric field is read through `_number`, so a field that changes from
an int to the object form in a later version is read either way.

`iter_json_records` streams the `jobs` array of a document from bytes: a
200,000-job document is never held whole, nor as a list of parsed objects.
msgspec finds where each record ends and decodes only the members the parser
reads; Python's json takes over for what msgspec refuses (NaN, broken input).

`iter_json_batches` is the fast road for the usual pretty-printed document:
a run of records (about 8 MiB) is decoded by msgspec in one call into typed
structs holding only those members, and `record_columns` turns it into
columns with a list comprehension per field instead of a function call per
record. Whatever that road cannot take (another layout, a value of an
unexpected type, a record the parser would refuse) goes record by record
through `parse_json_record`, so both roads give the same records and the
same errors.
"""

from __future__ import annotations

import gc
import json
import mmap
import multiprocessing
import os
import pickle
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import IO, Any, NamedTuple, TypedDict

import msgspec

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
    "JobID", "JobIDRaw", "Partition", "QOS", "Account", "User", "State", "Reason", "Priority",
    "Submit", "Eligible", "Start", "End", "AllocTRES", "ReqTRES", "NodeList", "JobName",
)
# The fields requested before JobIDRaw: documents recorded with them still read.
OLD_TEXT_FIELDS: tuple[str, ...] = tuple(f for f in TEXT_FIELDS if f != "JobIDRaw")
_STATE_AT = TEXT_FIELDS.index("State")
_UNSET_TIMES = ("", "Unknown", "None", "0")
_LAST_EPOCH = 32503680000  # year 3000: a later "time" is a garbled value
_MAX_NUMBER = float(2**63 - 1)  # an Int64 column's range (restart counts, ids)
_MAX_COUNT = 2**31 - 1  # an INTEGER column's range (GPUs)
_NO_NODES = ("", "None assigned", "(null)")


class RecordError(ValueError):
    """A record that cannot become a run; `field` names the culprit."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


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
    restart_cnt: int | None  # 24.11+ only
    # An array task's own numeric id (its $SLURM_JOB_ID, what GPU exporters
    # label samples with) where job_id is the "<array job>_<task>" form.
    alias: str | None = None


# -- JSON -------------------------------------------------------------------


def _number(value: Any, field: str) -> float | None:
    """A number in either shape: plain, or {"set", "infinite", "number"}; a value that is not finite
    or does not fit 64 bits is the record's error, not a crash of the read (int(inf), an Int64 column)."""
    kind = type(value)
    if kind is int or kind is float:  # exact types first: this runs a dozen times a record
        number = float(value)
        if -_MAX_NUMBER <= number <= _MAX_NUMBER:  # False for NaN too
            return number
        raise RecordError(field, f"number out of range: {_short(value)}")
    if value is None:
        return None
    if kind is _Number:
        if not value.set or value.infinite:
            return None
        if value.number is None:
            raise RecordError(field, "number object without a number")
        return float(value.number)
    if kind is dict or isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
        if value is None:
            raise RecordError(field, "number object without a number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(field, f"expected a number, got {type(value).__name__} {_short(value)}")
    return _number(value, field)


def _epoch(value: Any, field: str) -> int | None:
    if type(value) is int and value <= _LAST_EPOCH:
        return value if value > 0 else None
    number = _number(value, field)
    if number is None or number <= 0:
        return None  # Slurm writes 0 for a time that has not happened (end of a running job)
    if number > _LAST_EPOCH:
        raise RecordError(field, f"not an epoch time: {number:g}")
    return int(number)


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


def _map(record: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any]:
    value = record.get(key)
    if type(value) is not dict and not isinstance(value, Mapping):
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


def json_job_id(record: Mapping[str, Any]) -> str:
    raw = _number(record.get("job_id"), "job_id")
    if raw is None:
        raise RecordError("job_id", "missing")
    array = record.get("array")
    if type(array) is dict or isinstance(array, Mapping):
        array_job = _number(array.get("job_id"), "array.job_id")
        if array_job:
            task = _number(array.get("task_id"), "array.task_id")
            if task is not None:
                return f"{int(array_job)}_{int(task)}"
            pending = array.get("task")
            if isinstance(pending, str) and pending:
                # The not yet split part of a pending array, as sacct's text prints it.
                return f"{int(array_job)}_[{pending}]"
    het = record.get("het")
    if type(het) is dict or isinstance(het, Mapping):
        het_job = _number(het.get("job_id"), "het.job_id")
        if het_job:
            offset = _number(het.get("job_offset"), "het.job_offset")
            if offset is not None:
                return f"{int(het_job)}+{int(offset)}"
    return str(int(raw))


def _alias(job_id: str, raw: float | None) -> str | None:
    """The numeric id of a started array task ("1230_4" is job 1234 to the
    prolog) or of a heterogeneous job's component ("1233+1" is job 1234: each
    component is a job of its own, with its own cgroup and prolog); None for
    any other record."""
    if raw is None or "[" in job_id or ("_" not in job_id and "+" not in job_id):
        return None
    return str(int(raw))


def _json_gpus(items: Any, field: str) -> int | None:
    """GPUs in a TRES list: the untyped gres/gpu count, else the sum of typed ones."""
    if items is None:
        return None
    if not isinstance(items, list):
        raise RecordError(field, f"expected a list, got {_short(items)}")
    return _gres_gpus(
        ((item.get("name"), item.get("count")) for item in items
         if (type(item) is dict or isinstance(item, Mapping)) and item.get("type") == "gres"),
        field,
    )


def _gres_gpus(gres: Iterable[tuple[Any, Any]], field: str) -> int | None:
    plain: float | None = None
    typed = 0.0
    found = False
    for name, raw in gres:
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        count = _number(raw, field)
        if count is None or count < 0:
            continue
        found = True
        if name == "gpu":
            plain = count
        else:
            typed += count
    if not found:
        return None
    return _gpu_count(plain if plain is not None else typed, field)


def _gpu_count(count: float, field: str) -> int:
    if count > _MAX_COUNT:
        raise RecordError(field, f"GPU count out of range: {count:g}")
    return int(count)


def parse_json_record(record: Any) -> SacctRecord:
    if type(record) is not dict and not isinstance(record, Mapping):
        raise RecordError("job", f"expected an object, got {_short(record)}")
    job_id = json_job_id(record)
    state_obj = _map(record, "state", "state")
    current = state_obj.get("current")
    if type(current) is list and len(current) == 1 and type(current[0]) is str:
        tokens = current
    elif isinstance(current, str):
        tokens = current.split(",")
    elif isinstance(current, list) and all(isinstance(t, str) for t in current):
        tokens = list(current)
    else:
        raise RecordError("state.current", f"expected text or a list of text, got {_short(current)}")
    state = run_state(tokens)
    times = _map(record, "time", "time")
    tres = record.get("tres")
    if tres is not None and type(tres) is not dict and not isinstance(tres, Mapping):
        raise RecordError("tres", f"expected an object, got {_short(tres)}")
    tres = tres or {}
    gpus = _json_gpus(tres.get("allocated"), "tres.allocated")
    if gpus is None:
        gpus = _json_gpus(tres.get("requested"), "tres.requested")
    restarts = _number(record.get("restart_cnt"), "restart_cnt")
    return SacctRecord(
        job_id=job_id,
        name=_text(record.get("name"), "name"),
        account=_text(record.get("account"), "account"),
        user=_text(record.get("user"), "user"),
        partition=_text(record.get("partition"), "partition"),
        qos=_text(record.get("qos"), "qos"),
        priority=_number(record.get("priority"), "priority"),
        state=state,
        raw_state=",".join(tokens),
        reason=_reason(_text(state_obj.get("reason"), "state.reason")),
        submit=_epoch(times.get("submission"), "time.submission"),
        eligible=_epoch(times.get("eligible"), "time.eligible"),
        start=_epoch(times.get("start"), "time.start"),
        end=_epoch(times.get("end"), "time.end"),
        gpus=gpus or 0,
        nodes=_nodes(_text(record.get("nodes"), "nodes")),
        restart_cnt=None if restarts is None else int(restarts),
        alias=_alias(job_id, _number(record.get("job_id"), "job_id")),
    )


def _reason(reason: str | None) -> str | None:
    return None if reason in (None, "None") else reason


def _nodes(nodes: str | None) -> str | None:
    return None if nodes is None or nodes in _NO_NODES else nodes


# Bytes that may separate JSON tokens.
_WS = frozenset(b" \t\r\n")
# Longest single value (a job record) the reader waits for before calling it broken.
_MAX_VALUE = 1 << 20
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


# The members of a job record that `parse_json_record` reads. Decoding only
# these lets msgspec skip the rest (steps, exit codes, comments...) at C speed
# instead of building Python objects for them. A record of another shape
# fails this typing and is decoded whole, for the parser to name the field.
class _Ids(TypedDict, total=False):
    job_id: Any
    task_id: Any
    task: Any
    job_offset: Any


class _State(TypedDict, total=False):
    current: Any
    reason: Any


class _Times(TypedDict, total=False):
    submission: Any
    eligible: Any
    start: Any
    end: Any


class _Tres(TypedDict, total=False):
    type: Any
    name: Any
    count: Any


class _TresLists(TypedDict, total=False):
    allocated: list[_Tres] | None
    requested: list[_Tres] | None


class _Wanted(TypedDict, total=False):
    job_id: Any
    array: _Ids | None
    het: _Ids | None
    name: Any
    account: Any
    user: Any
    partition: Any
    qos: Any
    priority: Any
    state: _State | None
    time: _Times | None
    tres: _TresLists | None
    nodes: Any
    restart_cnt: Any


_ANY = msgspec.json.Decoder()
_RECORD = msgspec.json.Decoder(_Wanted)
_SKIP = msgspec.json.Decoder(msgspec.Raw)


class _Reader:
    """Incremental reading of one JSON document of bytes.

    The buffer holds the byte before pos, the unread tail and at most one
    chunk (one run of records, when `batch` reads); a value that straddles
    the end of the buffer is retried after the next chunk arrives. Each
    value's end is found by msgspec at C speed; values msgspec refuses but
    Python's json accepts (NaN, Infinity) go through `json` instead.
    """

    def __init__(self, stream: IO[str] | IO[bytes], chunk: int) -> None:
        self.stream = stream
        self.chunk = chunk
        # A bytearray once `fill` has built it, so that `batch` can frame a run
        # in place. Replaced, never resized: a run's structs may hold views
        # of it (msgspec.Raw members).
        self.buf: bytes | bytearray = b""
        self.pos = 0
        self.consumed = 0  # bytes dropped from the front of buf
        # Offset before which the buffer may drop bytes (None: pos decides):
        # the end of the last run sent to a worker, for the bytes between it
        # and the next run that a rewind to it needs (see _InFlight).
        self.mark: int | None = None
        self.eof = False
        self.decoder = json.JSONDecoder()

    def offset(self) -> int:
        return self.consumed + self.pos

    def _keep(self) -> int:
        """Where the buffer may start: the byte before pos, or the line
        start before it when near (a record's indent is read from its
        line, see `_indent`), or the mark."""
        keep = max(self.pos - 1, 0)
        line = self.buf.rfind(b"\n", max(keep - 256, 0), keep + 1)
        if line >= 0:
            keep = line
        return keep if self.mark is None else max(min(keep, self.mark - self.consumed), 0)

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

    def frame(self, longest: int | None = None) -> tuple[int, bytes] | None:
        """Where the run of whole records that starts at pos may end (the
        first end `batch` tries, found without decoding, so that a worker can
        decode it), and the closing line of its records. None where no run
        starts here.

        A record that starts a line ends at a line holding only its indent
        and "}": JSON strings hold no raw line breaks, and a span that
        decodes as a list of objects ends at a record boundary whatever the
        layout, so the layout only decides how fast, never what is read.
        """
        self.peek()
        indent = self._indent() if self.buf[self.pos : self.pos + 1] == b"{" else None
        if indent is None:
            return None
        self.fill(_BATCH)
        if self.pos < 1 or not isinstance(self.buf, bytearray):
            return None  # only at the document's first byte, where no record starts
        # The byte after a run's end is overwritten by `batch`: it must be in the buffer.
        limit = len(self.buf) - 1 if longest is None else min(len(self.buf) - 1, self.pos + longest)
        closing = b"\n" + indent + b"}"
        close = self.buf.rfind(closing, self.pos, limit)
        return None if close < 0 else (close + len(closing), closing)

    def batch(self) -> tuple[RecordColumns | None, int]:
        """The run of whole records that starts at pos, as `decode_run` reads it.

        Returns the columns and where the run ends, or None and the end of
        the span that must be read record by record (it failed the typing,
        holds a record `record_columns` refuses, or its end could not be
        found).
        """
        span = self.frame()
        if span is None:
            return None, self.pos
        (end, closing), buf, start = span, self.buf, self.pos - 1
        assert isinstance(buf, bytearray)
        for tries in range(_BATCH_TRIES):
            if tries:
                close = buf.rfind(closing, self.pos, end - len(closing))
                if close < 0:
                    return None, self.pos
                end = close + len(closing)
            # The run framed as a JSON array in place, by the byte before it
            # and the one after it (space, comma or bracket), put back after
            # the decode: no copy of the run.
            before, after = buf[start], buf[end]
            buf[start], buf[end] = ord("["), ord("]")
            try:
                return decode_run(memoryview(buf)[start : end + 1]), end
            except (msgspec.ValidationError, RecordError):
                return None, end
            except msgspec.DecodeError:
                # The closing line of something after the array (meta holds
                # objects at a record's indent), or a broken record: try an
                # earlier end, then leave it to the record-by-record reader.
                pass
            finally:
                buf[start], buf[end] = before, after
        return None, end - len(closing)

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
        """The next job record, decoded as far as the parser reads it, and its bytes."""
        self.peek()
        indent = self._indent() if self.buf[self.pos : self.pos + 1] == b"{" else None
        if indent is not None:
            close = self.buf.find(b"\n" + indent + b"}", self.pos, self.pos + _MAX_VALUE)
            if close >= 0:
                end = close + len(indent) + 2
                raw = bytes(self.buf[self.pos : end])
                try:
                    value = _RECORD.decode(raw)
                except msgspec.DecodeError:
                    pass  # not the object's end after all (or broken): find it the general way
                else:
                    self.pos = end
                    return value, raw
        span = self._span()
        if span is not None:
            raw = bytes(self.buf[self.pos : span])
            try:
                value = _decode_record(raw)
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


def _decode_record(raw: bytes) -> Any:
    try:
        return _RECORD.decode(raw)
    except msgspec.ValidationError:
        return _ANY.decode(raw)  # another shape: decoded whole, for the parser to name the field


# -- runs of records in one decode ---------------------------------------------

# Bytes of records decoded per msgspec call: large enough that the per-call
# work (and the polars frame built from each run) is spread over thousands
# of records, small enough to stay a fraction of the 1 GiB budget.
_BATCH = 8 << 20
# Ends tried per run before reading it record by record.
_BATCH_TRIES = 4


class _Number(msgspec.Struct, gc=False):
    """23.02+'s {"set", "infinite", "number"}; `_number` reads it like the dict."""

    set: bool = True
    infinite: bool = False
    number: int | float | None = None


# Every number the parser reads, in the shape of any version. Unknown
# members are skipped by msgspec; a value of another type fails the run's
# typing and sends it to the record-by-record reader, which names the field.
_Num = int | float | _Number | None


class _JobIds(msgspec.Struct, gc=False):
    job_id: _Num = None
    task_id: _Num = None
    task: Any = None
    job_offset: _Num = None


class _JobState(msgspec.Struct, gc=False):
    current: str | list[str] | None = None
    reason: str | None = None


class _JobTimes(msgspec.Struct, gc=False):
    submission: _Num = None
    eligible: _Num = None
    start: _Num = None
    end: _Num = None


class _TresItem(msgspec.Struct, gc=False):
    type: Any = None
    name: Any = None
    count: Any = None  # read (by `_number`) only for GPUs, as `_json_gpus` does


class _JobTres(msgspec.Struct, gc=False):
    allocated: list[_TresItem] | None = None
    # Read only where nothing is allocated (a pending job): left as bytes
    # until then, it costs the decode no objects.
    requested: msgspec.Raw = msgspec.Raw(b"null")


class _Job(msgspec.Struct, gc=False):
    job_id: _Num = None
    array: _JobIds | None = None
    het: _JobIds | None = None
    name: str | None = None
    account: str | None = None
    user: str | None = None
    partition: str | None = None
    qos: str | None = None
    priority: _Num = None
    state: _JobState | None = None
    time: _JobTimes | None = None
    tres: _JobTres | None = None
    nodes: str | None = None
    restart_cnt: _Num = None


_BATCH_DECODER = msgspec.json.Decoder(list[_Job])
_TRES_DECODER = msgspec.json.Decoder(list[_TresItem] | None)


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """A run of records as columns named after the `SacctRecord` fields."""

    columns: dict[str, list[Any]]
    size: int


def _struct_job_id(job: _Job) -> str:
    raw = _number(job.job_id, "job_id")
    if raw is None:
        raise RecordError("job_id", "missing")
    array = job.array
    if array is not None:
        array_job = _number(array.job_id, "array.job_id")
        if array_job:
            task = _number(array.task_id, "array.task_id")
            if task is not None:
                return f"{int(array_job)}_{int(task)}"
            if isinstance(array.task, str) and array.task:
                return f"{int(array_job)}_[{array.task}]"
    het = job.het
    if het is not None:
        het_job = _number(het.job_id, "het.job_id")
        if het_job:
            offset = _number(het.job_offset, "het.job_offset")
            if offset is not None:
                return f"{int(het_job)}+{int(offset)}"
    return str(int(raw))


def _struct_gpus(items: list[_TresItem] | None, field: str) -> int | None:
    """`_json_gpus` over typed TRES items."""
    if items is None:
        return None
    return _gres_gpus(((item.name, item.count) for item in items if item.type == "gres"), field)


def _gpu_column(jobs: list[_Job]) -> list[int]:
    """The GPUs of each record as `parse_json_record` counts them, visiting
    only the gres items of the allocated TRES in Python."""
    plain: dict[int, float | int] = {}
    typed: dict[int, float | int] = {}
    gres = [(i, item.name, item.count) for i, job in enumerate(jobs)
            if job.tres is not None and job.tres.allocated
            for item in job.tres.allocated if item.type == "gres"]
    for i, name, count in gres:
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        number = count if type(count) is int and 0 <= count <= _MAX_COUNT else _number(count, "tres.allocated")
        if number is None or number < 0:
            continue
        if name == "gpu":
            plain[i] = number
        else:
            typed[i] = typed.get(i, 0.0) + number
    return [_gpu_count(plain[i], "tres.allocated") if i in plain
            else _gpu_count(typed[i], "tres.allocated") if i in typed else _requested_gpus(job.tres)
            for i, job in enumerate(jobs)]


def _requested_gpus(tres: _JobTres | None) -> int:
    """GPUs of a record with none allocated (a pending job): those it asks for."""
    if tres is None:
        return 0
    try:
        requested = _TRES_DECODER.decode(tres.requested)
    except msgspec.DecodeError:
        raise RecordError("tres.requested", "not a list of TRES") from None
    return _struct_gpus(requested, "tres.requested") or 0


def _raw_state(current: str | list[str] | None) -> str:
    if isinstance(current, str):
        return current
    if current is None or any("," in token for token in current):
        # Missing, or tokens that joined would split apart: the record-by-record reader decides.
        raise RecordError("state.current", "not a plain state")
    return ",".join(current)


def _optional_int(value: Any, field: str) -> int | None:
    number = _number(value, field)
    return None if number is None else int(number)


def _epochs(values: list[Any], field: str) -> list[int | None]:
    return [v if type(v) is int and 0 < v <= _LAST_EPOCH else _epoch(v, field) for v in values]


def record_columns(jobs: list[_Job]) -> RecordColumns:
    """The `SacctRecord` fields of a run of records, column by column, with
    the results `parse_json_record` gives each record. RecordError means some
    record needs the record-by-record reader (which then names it)."""
    states = [job.state for job in jobs]
    times = [job.time for job in jobs]
    if None in states or None in times:
        raise RecordError("state", "missing")
    raw_states = [c[0] if type(c) is list and len(c) == 1 else _raw_state(c)
                  for c in [state.current for state in states if state is not None]]
    decided = {raw: run_state(raw.split(",")) for raw in set(raw_states)}
    reasons = [state.reason for state in states if state is not None]
    spans = [t for t in times if t is not None]
    job_ids = [
        str(job.job_id)
        if type(job.job_id) is int and (job.array is None or job.array.job_id == 0)
        and (job.het is None or job.het.job_id == 0)
        else _struct_job_id(job)
        for job in jobs
    ]
    columns: dict[str, list[Any]] = {
        "job_id": job_ids,
        "name": [job.name or None for job in jobs],
        "account": [job.account or None for job in jobs],
        "user": [job.user or None for job in jobs],
        "partition": [job.partition or None for job in jobs],
        "qos": [job.qos or None for job in jobs],
        "priority": [float(p) if type(p := job.priority) is int else _number(p, "priority") for job in jobs],
        "state": [decided[raw] for raw in raw_states],
        "raw_state": raw_states,
        "reason": [None if not r or r == "None" else r for r in reasons],
        "submit": _epochs([t.submission for t in spans], "time.submission"),
        "eligible": _epochs([t.eligible for t in spans], "time.eligible"),
        "start": _epochs([t.start for t in spans], "time.start"),
        "end": _epochs([t.end for t in spans], "time.end"),
        "gpus": _gpu_column(jobs),
        "nodes": [None if n is None or n in _NO_NODES else n for n in [job.nodes for job in jobs]],
        "restart_cnt": [None if r is None else r if type(r) is int and abs(r) <= _MAX_NUMBER
                        else _optional_int(r, "restart_cnt") for r in [job.restart_cnt for job in jobs]],
        "alias": [None if "_" not in job_id and "+" not in job_id else _alias(job_id, _number(job.job_id, "job_id"))
                  for job_id, job in zip(job_ids, jobs, strict=True)],
    }
    return RecordColumns(columns, len(jobs))


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector: a run of records makes tens of
    thousands of objects that hold no cycles, and collections triggered by
    their count alone cost a tenth of the time of reading them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def decode_run(data: bytes | bytearray | memoryview) -> RecordColumns:
    """A run of records framed as a JSON array, as columns: the one reading
    of a run, whether `_Reader.batch` calls it in place or a worker of a
    `RunPool` on a copy.

    msgspec.ValidationError or RecordError: some record of the run needs the
    record-by-record reader; msgspec.DecodeError: the span is not a list of
    objects (not a run's end after all, or broken JSON)."""
    with _no_cycle_collection():
        return record_columns(_BATCH_DECODER.decode(data))


def _read(run: memoryview) -> RecordColumns | None:
    """A run sent to a `RunPool`, read; None for a run to be read again
    record by record, which then names the record that failed."""
    try:
        return decode_run(run)
    except (msgspec.DecodeError, RecordError):
        return None


def _serve(conn: Connection, shared: mmap.mmap, slot: int) -> None:
    """A worker of a RunPool: reads the runs it is told of, in order, until
    told to stop. Each answer is pickled into the rest of the run's slot
    and its length sent (-1: read it in the reading process), so that the
    worker goes on with the next run without waiting for the answer to be
    read."""
    try:
        while (task := conn.recv()) is not None:
            start, size = task
            columns = _read(memoryview(shared)[start : start + size])
            answer = -1 if columns is None else pickle.dumps(columns, pickle.HIGHEST_PROTOCOL)
            if isinstance(answer, bytes) and size + len(answer) <= slot:
                shared[start + size : start + size + len(answer)] = answer
                answer = len(answer)
            conn.send(answer)  # the bytes themselves if the slot is too short
    except (EOFError, OSError):
        pass  # the reading process is gone


# A document this far read in one process (about 3,500 jobs of sacct's
# 23.11 JSON) starts the workers of a `RunPool`: smaller ones, the common
# incremental window, never pay for process start-up.
_PARALLEL_AFTER = 16 << 20


def default_workers() -> int:
    """Workers of a RunPool by default: one per CPU but the one this process reads on."""
    return max((os.cpu_count() or 1) - 1, 0)


class RunPool:
    """Worker processes that read runs of records while this process frames
    the next ones, reads one itself whenever every worker is busy, and takes
    the results in document order.

    A run reaches a worker through memory shared with it, one slot per run
    in flight: a copy per run, and a message of two numbers on a pipe of
    its own, sent and answered by this thread (an executor's helper threads
    would wait for the GIL while this thread decodes). The workers start
    once a document has been read past `after` bytes (default
    `_PARALLEL_AFTER`).
    """

    def __init__(self, workers: int | None = None, after: int | None = None) -> None:
        self.workers = default_workers() if workers is None else workers
        self.after = _PARALLEL_AFTER if after is None else after
        # Two runs for each worker (one read, one waiting), one read here
        # and one answered: no worker waits for this process.
        self.depth = 2 * self.workers + 2
        # A run `frame` gives (at most `longest`), with room after it for
        # its answer: columns are a fraction of the JSON they come from.
        self.longest = _BATCH + (_BATCH >> 3)
        self.slot = self.longest + (_BATCH >> 2)
        self.shared: mmap.mmap | None = None
        self.next_slot = 0
        self.conns: list[Connection] = []
        self.procs: list[BaseProcess] = []
        self.waiting: list[int] = []  # runs sent to each worker and not yet answered
        self.answers: list[deque[int | bytes]] = []  # answers read, not yet taken
        self.broken = False

    def ready(self, offset: int) -> bool:
        if self.broken or self.workers < 1 or offset < self.after:
            return False
        if self.shared is None:
            # Populated at once (Linux): faulting its pages in run by run costs more than the copies.
            self.shared = mmap.mmap(-1, self.depth * self.slot,
                                    flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
            # Forked: a worker starts at once, inherits the shared memory, and
            # neither imports nor runs the main script again as a spawned one
            # would. A fork copies no thread, so a lock held by one (polars',
            # DuckDB's) stays held in the child: workers run msgspec and
            # Python only, never those.
            context = multiprocessing.get_context("fork")
            for _ in range(self.workers):
                here, there = context.Pipe()
                proc = context.Process(target=_serve, args=(there, self.shared, self.slot), daemon=True)
                proc.start()
                there.close()
                self.conns.append(here)
                self.procs.append(proc)
                self.waiting.append(0)
                self.answers.append(deque())
        return True

    def submit(self, run: memoryview) -> tuple[int, int | None, RecordColumns | None]:
        """Read a run (at most `longest` bytes) in an idle worker, or here
        when none is idle. Returns where the run lies in the shared memory,
        the worker (None: read here) and what was read here. A slot is
        reused `depth` runs later: by then the run it held has been taken
        (see _InFlight)."""
        assert self.shared is not None
        start = self.next_slot * self.slot
        self.next_slot = (self.next_slot + 1) % self.depth
        size = len(run) + 2
        self.shared[start] = ord("[")
        self.shared[start + 1 : start + size - 1] = run
        self.shared[start + size - 1] = ord("]")
        for worker in range(self.workers):
            while self.waiting[worker] and self.conns[worker].poll():
                self._answer(worker)
        idle = min(range(self.workers), key=self.waiting.__getitem__)
        if self.waiting[idle] >= 2 or self.broken:
            return start, None, _read(memoryview(self.shared)[start : start + size])
        try:
            self.conns[idle].send((start, size))
        except OSError:
            self.broken = True  # a worker died: its run is read here
            return start, None, None
        self.waiting[idle] += 1
        return start, idle, None

    def _answer(self, worker: int) -> None:
        self.waiting[worker] -= 1
        try:
            self.answers[worker].append(self.conns[worker].recv())
        except (EOFError, OSError):
            self.broken = True
            self.answers[worker].append(-1)

    def receive(self, worker: int, start: int, size: int) -> RecordColumns | None:
        """A worker's answer for the run at `start`, its oldest; None if it
        could not read it, or died (this process then reads the rest)."""
        assert self.shared is not None
        if not self.answers[worker]:
            self._answer(worker)
        answer = self.answers[worker].popleft()
        if answer == -1:
            return None
        columns: RecordColumns = pickle.loads(answer if isinstance(answer, bytes) else
                                              memoryview(self.shared)[start + size : start + size + answer])
        return columns

    def run(self, start: int, size: int) -> memoryview:
        """The records of a run in flight, without its brackets."""
        assert self.shared is not None
        return memoryview(self.shared)[start + 1 : start + size - 1]

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass  # already gone
            conn.close()
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()  # stuck answering a run nobody takes
                proc.join()
        self.conns, self.procs, self.waiting, self.answers = [], [], [], []

    def __enter__(self) -> RunPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Sent(NamedTuple):
    """A run in a worker (or read here), and where to read it again in this process."""

    gap_start: int  # document offset of `gap`
    gap: bytes  # from the previous run's end (or the line start) to the run
    start: int  # where the run lies in the pool's shared memory
    size: int
    end: int  # document offset after the run
    worker: int | None  # None: read here, into `value`
    value: RecordColumns | None


class _InFlight:
    """Runs sent to a pool's workers, oldest first.

    A run a worker cannot read (a record of another shape, a bad value, an
    end that was not a run's end) is read again by this process: the reader
    is rewound to its start, rebuilt from the bytes of the runs in flight,
    and the later runs' results are dropped, so records, their order and
    their errors are those of reading in one process."""

    def __init__(self, reader: _Reader, pool: RunPool) -> None:
        self.reader = reader
        self.pool = pool
        self.sent: deque[_Sent] = deque()

    def send(self, end: int) -> None:
        """The run from pos to `end` to a worker, or read here if all are busy."""
        r = self.reader
        start = r.pos
        gap_start = self.sent[-1].end - r.consumed if self.sent else max(r.buf.rfind(b"\n", 0, start), 0)
        with memoryview(r.buf) as view:
            at, worker, value = self.pool.submit(view[start:end])
            gap = bytes(view[gap_start:start])
        self.sent.append(_Sent(r.consumed + gap_start, gap, at, end - start + 2, r.consumed + end, worker, value))
        r.pos = end
        r.mark = r.consumed + end

    def take(self) -> RecordColumns | None:
        """The oldest run's columns, or None after rewinding the reader to it."""
        sent = self.sent.popleft()
        value = sent.value if sent.worker is None else self.pool.receive(sent.worker, sent.start, sent.size)
        if value is None:
            self._rewind(sent)
        elif not self.sent:
            self.reader.mark = None
        return value

    def _rewind(self, sent: _Sent) -> None:
        r = self.reader
        runs = [sent, *self.sent]
        self.sent.clear()
        for run in runs[1:]:
            if run.worker is not None:
                # Dropped; taken, so that no worker reads a slot sent again.
                self.pool.receive(run.worker, run.start, run.size)
        parts: list[bytes | memoryview] = []
        for run in runs:
            parts += [run.gap, self.pool.run(run.start, run.size)]
        parts.append(memoryview(r.buf)[runs[-1].end - r.consumed :])
        r.buf = bytearray().join(parts)
        r.consumed = sent.gap_start
        r.pos = len(sent.gap)
        r.mark = None


def iter_json_records(stream: IO[str] | IO[bytes], meta: dict[str, Any] | None = None,
                      chunk: int = 1 << 20) -> Iterator[tuple[Any, bytes]]:
    """Yield each element of the document's top-level `jobs` array with its bytes.

    An element that is an object holds only the members `parse_json_record`
    reads; the bytes are for a quarantine message that shows it all. Other
    top-level members (meta, errors, warnings) are small and stored in `meta`
    when given; a broken document raises DocumentError after every element
    before the break was yielded.
    """
    for item in _iter_jobs(stream, meta, chunk, batches=False, pool=None):
        if not isinstance(item, RecordColumns):  # never one, without batches
            yield item


def iter_json_batches(stream: IO[str] | IO[bytes], meta: dict[str, Any] | None = None,
                      chunk: int = 1 << 20,
                      pool: RunPool | None = None) -> Iterator[RecordColumns | tuple[Any, bytes]]:
    """The `jobs` array as `iter_json_records` reads it, but runs of records
    that read cleanly come as one `RecordColumns` each: decoded by msgspec in
    one call and turned into columns without a Python object per record.
    Anything else (another shape, a bad value, a compact layout) comes record
    by record as from `iter_json_records`, in document order. With a pool,
    runs of a large document are read by its workers."""
    return _iter_jobs(stream, meta, chunk, batches=True, pool=pool)


def _iter_jobs(stream: IO[str] | IO[bytes], meta: dict[str, Any] | None, chunk: int,
               batches: bool, pool: RunPool | None) -> Iterator[RecordColumns | tuple[Any, bytes]]:
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
                yield from _iter_array(reader, batches, _InFlight(reader, pool) if pool and batches else None)
        else:
            value = reader.value()
            if meta is not None:
                meta[key] = value
        sep = reader.peek()
        if sep == "}":
            return
        reader.expect(",")


def _iter_array(reader: _Reader, batches: bool,
                runs: _InFlight | None) -> Iterator[RecordColumns | tuple[Any, bytes]]:
    slow_until = 0  # offset up to which records are read one by one
    here = False  # the record at pos is read in this process: no run can be sent from it
    while True:
        if runs is not None and not here and reader.offset() >= slow_until and runs.pool.ready(reader.offset()):
            span = reader.frame(runs.pool.longest - 2)
            if span is None:
                here = True
                while runs.sent:
                    if (columns := runs.take()) is None:
                        break
                    yield columns
                continue
            runs.send(span[0])
            if len(runs.sent) >= runs.pool.depth:
                if (columns := runs.take()) is None:
                    here = True
                    continue
                yield columns
        else:
            assert runs is None or not runs.sent
            here = False
            columns = None
            if batches and reader.offset() >= slow_until:
                columns, end = reader.batch()
                if columns is not None:
                    reader.pos = end
                slow_until = reader.consumed + end
            if columns is not None:
                yield columns
            else:
                yield reader.record()
        try:
            sep = reader.peek()
            if sep != "]":
                reader.expect(",")
                continue
        except DocumentError:
            if runs is None or not runs.sent:
                raise
        # The array ends or breaks here: the runs before come first.
        rewound = False
        while runs is not None and runs.sent:
            if (columns := runs.take()) is None:
                rewound = True
                break
            yield columns
        if rewound:
            here = True
            continue
        if reader.peek() != "]":
            reader.expect(",")  # raises the DocumentError again, now that every run before it is out
        reader.pos += 1
        return


def iter_json_jobs(stream: IO[str] | IO[bytes], meta: dict[str, Any] | None = None,
                   chunk: int = 1 << 20) -> Iterator[Any]:
    """Each element of the `jobs` array whole (`iter_json_records` without the trimming)."""
    for _, raw in iter_json_records(stream, meta, chunk):
        yield whole_record(raw)


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


def _text_gpus(tres: str, field: str) -> int | None:
    plain: int | None = None
    typed = 0
    found = False
    for part in tres.split(","):
        if not part:
            continue
        name, sep, count = part.partition("=")
        if not sep:
            raise RecordError(field, f"not name=count: {_short(part)}")
        if name == "gres/gpu" or name.startswith("gres/gpu:"):
            try:
                number = int(count)
            except ValueError:
                raise RecordError(field, f"GPU count is not a number: {_short(part)}") from None
            value = _gpu_count(number, field)
            found = True
            if name == "gres/gpu":
                plain = value
            else:
                typed += value
    if not found:
        return None
    return plain if plain is not None else typed


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
    `TEXT_FIELDS` has a number second (JobIDRaw; the partition there in
    `OLD_TEXT_FIELDS`) and a state word where the old list has the reason."""
    parts = line.split("|", len(TEXT_FIELDS) - 1)
    if (len(parts) == len(TEXT_FIELDS) and parts[1].strip().isdecimal()
            and parts[_STATE_AT].split(" ")[0] in BASE_STATES):
        return TEXT_FIELDS, parts
    return OLD_TEXT_FIELDS, line.split("|", len(OLD_TEXT_FIELDS) - 1)


def is_text_header(line: str) -> bool:
    """The header line sacct prints without --noheader (a recorded document may hold one)."""
    return line.split("|", 1)[0].strip() == "JobID"


def parse_text_record(line: str) -> SacctRecord:
    """One `sacct --parsable2 --noheader` line in `TEXT_FIELDS` order, or in
    `OLD_TEXT_FIELDS` order as recorded before JobIDRaw was requested."""
    fields, parts = _text_fields(line.rstrip("\n"))
    if len(parts) != len(fields):
        raise RecordError("line", f"expected {len(fields)} fields, got {len(parts)}")
    f = dict(zip(fields, parts, strict=True))
    job_id = f["JobID"].strip()
    if not job_id or not job_id[0].isdigit():
        raise RecordError("JobID", f"not a job id: {_short(job_id)}")
    # "CANCELLED by 0": the state word comes first.
    state_word = f["State"].split(" ")[0]
    priority: float | None = None
    if f["Priority"].strip():
        try:
            priority = float(f["Priority"])
        except ValueError:
            raise RecordError("Priority", f"not a number: {_short(f['Priority'])}") from None
    gpus = _text_gpus(f["AllocTRES"], "AllocTRES")
    if gpus is None:
        gpus = _text_gpus(f["ReqTRES"], "ReqTRES")
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
    )
