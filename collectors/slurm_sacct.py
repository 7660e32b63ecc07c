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
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
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
# name may itself contain the `|` separator.
TEXT_FIELDS: tuple[str, ...] = (
    "JobID", "Partition", "QOS", "Account", "User", "State", "Reason", "Priority",
    "Submit", "Eligible", "Start", "End", "AllocTRES", "ReqTRES", "NodeList", "JobName",
)
_UNSET_TIMES = ("", "Unknown", "None", "0")
_LAST_EPOCH = 32503680000  # year 3000: a later "time" is a garbled value
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


# -- JSON -------------------------------------------------------------------


def _number(value: Any, field: str) -> float | None:
    """A number in either shape: plain, or {"set", "infinite", "number"}."""
    kind = type(value)
    if kind is int or kind is float:  # exact types first: this runs a dozen times a record
        return float(value)
    if value is None:
        return None
    if kind is dict or isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
        if value is None:
            raise RecordError(field, "number object without a number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(field, f"expected a number, got {type(value).__name__} {_short(value)}")
    return float(value)


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


def _json_gpus(items: Any, field: str) -> int | None:
    """GPUs in a TRES list: the untyped gres/gpu count, else the sum of typed ones."""
    if items is None:
        return None
    if not isinstance(items, list):
        raise RecordError(field, f"expected a list, got {_short(items)}")
    plain: float | None = None
    typed = 0.0
    found = False
    for item in items:
        if (type(item) is not dict and not isinstance(item, Mapping)) or item.get("type") != "gres":
            continue
        name = item.get("name")
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        count = _number(item.get("count"), field)
        if count is None or count < 0:
            continue
        found = True
        if name == "gpu":
            plain = count
        else:
            typed += count
    if not found:
        return None
    return int(plain if plain is not None else typed)


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

    The buffer holds at most the unread tail plus one chunk; a value that
    straddles the end of the buffer is retried after the next chunk arrives.
    Each value's end is found by msgspec at C speed; values msgspec refuses
    but Python's json accepts (NaN, Infinity) go through `json` instead.
    """

    def __init__(self, stream: IO[str] | IO[bytes], chunk: int) -> None:
        self.stream = stream
        self.chunk = chunk
        self.buf = b""
        self.pos = 0
        self.consumed = 0  # bytes dropped from the front of buf
        self.eof = False
        self.decoder = json.JSONDecoder()

    def offset(self) -> int:
        return self.consumed + self.pos

    def _more(self) -> bool:
        if self.eof:
            return False
        data = self.stream.read(self.chunk)
        if not data:
            self.eof = True
            return False
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        self.consumed += self.pos
        self.buf = self.buf[self.pos :] + data
        self.pos = 0
        return True

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
        indent = self.buf[line : self.pos]
        return indent if not indent.strip() else None

    def record(self) -> tuple[Any, bytes]:
        """The next job record, decoded as far as the parser reads it, and its bytes."""
        self.peek()
        indent = self._indent() if self.buf[self.pos : self.pos + 1] == b"{" else None
        if indent is not None:
            close = self.buf.find(b"\n" + indent + b"}", self.pos, self.pos + _MAX_VALUE)
            if close >= 0:
                end = close + len(indent) + 2
                raw = self.buf[self.pos : end]
                try:
                    value = _RECORD.decode(raw)
                except msgspec.DecodeError:
                    pass  # not the object's end after all (or broken): find it the general way
                else:
                    self.pos = end
                    return value, raw
        span = self._span()
        if span is not None:
            raw = self.buf[self.pos : span]
            try:
                value = _decode_record(raw)
            except msgspec.DecodeError:
                pass  # msgspec's end was not the value's end: Python's json finds it
            else:
                self.pos = span
                return value, raw
        start = self.offset()
        value = self._json_value()
        return value, self.buf[start - self.consumed : self.pos]

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


def iter_json_records(stream: IO[str] | IO[bytes], meta: dict[str, Any] | None = None,
                      chunk: int = 1 << 20) -> Iterator[tuple[Any, bytes]]:
    """Yield each element of the document's top-level `jobs` array with its bytes.

    An element that is an object holds only the members `parse_json_record`
    reads; the bytes are for a quarantine message that shows it all. Other
    top-level members (meta, errors, warnings) are small and stored in `meta`
    when given; a broken document raises DocumentError after every element
    before the break was yielded.
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
                while True:
                    yield reader.record()
                    sep = reader.peek()
                    if sep == "]":
                        reader.pos += 1
                        break
                    reader.expect(",")
        else:
            value = reader.value()
            if meta is not None:
                meta[key] = value
        sep = reader.peek()
        if sep == "}":
            return
        reader.expect(",")


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
                value = int(count)
            except ValueError:
                raise RecordError(field, f"GPU count is not a number: {_short(part)}") from None
            found = True
            if name == "gres/gpu":
                plain = value
            else:
                typed += value
    if not found:
        return None
    return plain if plain is not None else typed


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


def parse_text_record(line: str) -> SacctRecord:
    """One `sacct --parsable2 --noheader` line in `TEXT_FIELDS` order."""
    parts = line.rstrip("\n").split("|", len(TEXT_FIELDS) - 1)
    if len(parts) != len(TEXT_FIELDS):
        raise RecordError("line", f"expected {len(TEXT_FIELDS)} fields, got {len(parts)}")
    f = dict(zip(TEXT_FIELDS, parts, strict=True))
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
    )
