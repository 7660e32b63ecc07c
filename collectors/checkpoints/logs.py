"""Stream `logs`: checkpoint, restore and step lines of a job's training log.

Which lines count comes from presets, one per framework, each a regular
expression over the framework's own message (sources below), plus a custom
pattern per site (named groups `step` and optionally `time`). A line's time
is its own: the `time` group, else a timestamp near its start (Python
logging's asctime, Megatron's `[%Y-%m-%d %H:%M:%S.%f]`, ISO 8601, the
`timestamps=true` prefix of Kubernetes pod logs, the Hugging Face examples'
month-first `%m/%d/%Y %H:%M:%S`); a line without one cannot
say when the save happened and is counted in one quarantine row per file.

Kinds of line: `checkpoint` (a save completed, dated by the framework's own
completion line: a `checkpoints` row of kind checkpoint), `saving` (a save
began: never a checkpoint by itself, so a kill inside a long save leaves none;
with the completion line after it, the save's save_s and, where the
completion names no step, its step), `completes` (a line that ends the pending
save and is nothing without one), `progress` (a step report: the steps
completed by then) and `restore` (a checkpoint loaded at a step: a `restore`
row, the step a restart resumed from, which the rollback basis reads; without
one, a restart's first step report minus one). A framework without a
completion line (Lightning; DeepSpeed from v0.17.1; Hugging Face without
save_total_limit, and from 5.12) gives its checkpoints through the files
stream, which dates a save by its last file or marker.

Sources of the presets, each checked against the releases of the last three years (the case files
tests/cases/checkpoints/log_*.json hold each version's lines and name the code they come from):
- hf_trainer: huggingface/transformers src/transformers/trainer.py, 4.30.2 to 5.25.0: `_save` logs "Saving
  model checkpoint to {output_dir}" as a save starts (4.36 saves to tmp-checkpoint-N and renames it);
  `_rotate_checkpoints` logs "Deleting older checkpoint [..] due to args.save_total_limit" after
  trainer_state.json (to 5.0; 5.12 on rotate silently); restore "Continuing training from global step N"
  (4.x to 5.0), "Resuming training from checkpoint with epoch E and global step N" (5.12 on).
- lightning: Lightning-AI/pytorch-lightning 2.1.0 to 2.6.5, src/lightning/pytorch/callbacks/model_checkpoint.py
  "Epoch {e}, global step {s}: ... saving model to {filepath!r}" (logged before the save), and
  trainer/connectors/checkpoint_connector.py "Restored all states from the checkpoint at {path}" (the step then
  from the path's `step=`).
- megatron: NVIDIA/Megatron-LM 23.08 to core_v0.19.0 and main, megatron/(training/)checkpointing.py "saving
  checkpoint at iteration {:7d}", "scheduled an async checkpoint save at iteration", "successfully saved
  checkpoint at iteration" (to core_r0.5.0, and deepspeedai/Megatron-DeepSpeed) or "from iteration" (0.7 on,
  printed when an async save is finalized), "successfully loaded checkpoint from ... at iteration N";
  training.py " iteration {:8d}/{:8d} |".
- deepspeed: deepspeedai/DeepSpeed v0.12.6 to v0.19.5, deepspeed/runtime/engine.py "Saving model checkpoint:
  {save_path}" (a global_step<N> path), "step={step}, skipped=..." (the step being completed);
  checkpoint_engine/torch_checkpoint_engine.py "[Torch] Checkpoint {tag} is ready now!" (to v0.17.0), "[Torch]
  Loading checkpoint from" (to v0.17.0) and "[Torch] Begin Load checkpoint from" (later).
- torchtitan: pytorch/torchtitan v0.1.0 to v0.2.2 and main, components/checkpoint.py, later
  components/checkpointer/dcp.py "Saving the checkpoint" or "Staging the checkpoint" (async), "Finished saving
  the checkpoint", "Last step checkpoint completed", "Loading the checkpoint from .../step-<N>.";
  components/metrics.py "step: {step}  loss: ..." (colored by default). Its save lines name no step: the last
  step the log reported.
- keras: keras-team/keras keras/src/callbacks/model_checkpoint.py "Epoch {epoch}: [... ,] saving model to" and,
  from Keras 3, "Epoch {epoch}: finished saving model to" (the epoch is the step).

A preset's pattern runs on at most the first MATCH_CHARS (4,096) characters of a line that holds one of its
words (NEEDLES), and every repetition in it is bounded: the cost of a line is linear in its length.

Incremental: the cursor per file is its inode, a hash of its first line, the
byte offset after the last whole line read and the last step it reported. A
file replaced (another inode) or truncated (shorter, or another first line)
is read again from its start. A pass reads at most `max_read_bytes` of a
file and a line longer than `max_line_bytes` is skipped unread past that
bound (one quarantine row names the file and the offset), so a 10 GB line
costs one buffer, not 10 GB of memory.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from preemptlens.contract import Reject

# Every repetition in a preset is bounded and every gap excludes what ends it, so a match costs at most a few
# hundred steps per place it can start: the cost of a line is linear in its length (benchmarks/bench_presets.py).
PATH = r"[^\s\[\]'\"]{0,1024}?"  # a path as the frameworks print it: no blanks, no brackets, no quotes

PRESETS: dict[str, tuple[tuple[str, str], ...]] = {
    "hf_trainer": (
        # logged when a save starts; 4.36 to 4.3x save into tmp-checkpoint-N first and rename it after
        ("saving", rf"Saving model checkpoint to {PATH}checkpoint-(?P<step>\d{{1,18}})\b"),
        # logged once trainer_state.json is written (with save_total_limit, up to 5.0): the pending save is done
        ("completes", r"Deleting older checkpoint \[[^\]]{0,1024}\] due to args\.save_total_limit"),
        ("restore", r"(?:Continuing training from global step|Resuming training from checkpoint with epoch "
                    r"\d{1,9} and global step) (?P<step>\d{1,18})\b"),
    ),
    "lightning": (
        # ModelCheckpoint logs this before it saves (verbose, with a monitor); no line says a save completed
        ("saving", r"Epoch \d{1,9}, global step (?P<step>\d{1,18}): [^\n]{0,512}?saving model to"),
        ("restore", rf"Restored all states from the checkpoint at {PATH}step=(?P<step>\d{{1,18}})\b"),
    ),
    "megatron": (
        ("saving", r"(?:saving checkpoint|scheduled an async checkpoint save) at iteration"
                   r"\s{1,16}(?P<step>\d{1,18})\b"),
        # "at iteration" before 2024 (core_r0.5.0 and older) and in Megatron-DeepSpeed, "from iteration" after;
        # an async save prints it when the save is finalized
        ("checkpoint", r"successfully saved (?:local )?checkpoint (?:from|at) iteration\s{1,16}(?P<step>\d{1,18})\b"),
        ("restore", r"successfully loaded checkpoint from [^\n]{0,1024}? at iteration (?P<step>\d{1,18})\b"),
        ("progress", r"\biteration\s{1,16}(?P<step>\d{1,18})/\s{0,16}\d{1,18} \|"),
    ),
    "deepspeed": (
        ("saving", rf"Saving model checkpoint: {PATH}global_step(?P<step>\d{{1,18}})\b"),
        # to v0.17.0; v0.17.1 and later log no completion (the `latest` file says it: the files stream)
        ("checkpoint", r"\[Torch\] Checkpoint global_step(?P<step>\d{1,18}) is ready now!"),
        ("restore", rf"\[Torch\] (?:Loading|Begin Load) checkpoint from {PATH}global_step(?P<step>\d{{1,18}})/"),
        ("progress", r"\bstep=(?P<step>\d{1,18}), skipped="),
    ),
    "torchtitan": (
        ("saving", r"\b(?:Saving|Staging) the checkpoint\b"),
        # "Finished staging" (async) is not a completion: the upload goes on after it
        ("checkpoint", r"\bFinished saving the checkpoint\b|\bFinish saving the checkpoint in the background\b"
                       r"|\bLast step checkpoint completed\b"),
        ("restore", rf"Loading the checkpoint from {PATH}step-(?P<step>\d{{1,18}})\b"),
        # colored by default: an escape sequence may sit between the step and "loss:"
        ("progress", r"(?<!validate )(?:\x1b\[[0-9;]{0,16}m|\b)step: {0,16}(?P<step>\d{1,18}) {1,16}"
                     r"(?:\x1b\[[0-9;]{0,16}m)?loss:"),
    ),
    "keras": (
        ("saving", r"Epoch (?P<step>\d{1,18}): (?:[^,\n]{0,256}, )?saving model to"),
        # Keras 3 (keras/src/callbacks/model_checkpoint.py)
        ("checkpoint", r"Epoch (?P<step>\d{1,18}): finished saving model to"),
    ),
}

# Words each preset's lines must hold: a chunk is searched for these at C speed, and only the lines holding
# one are matched against the patterns (a custom pattern, without such words, is searched for as a regex).
NEEDLES: dict[str, tuple[bytes, ...]] = {
    "hf_trainer": (b"Saving model checkpoint", b"Deleting older checkpoint", b"training from"),
    "lightning": (b"global step", b"Restored all states"),
    # every line of the preset names its iteration: one word, one search
    "megatron": (b"iteration",),
    "deepspeed": (b"Saving model checkpoint", b"is ready now", b"checkpoint from", b"skipped="),
    "torchtitan": (b"the checkpoint", b"step:", b"Last step checkpoint"),
    "keras": (b"saving model to",),
}

# Presets match within the first MATCH_CHARS characters of a line: every framework line they read is far shorter
# (its path included), and a longer line costs no more than its head.
MATCH_CHARS = 4096

# A timestamp near a line's start: `2026-12-04 19:32:25,123`, `[2026-12-04 19:32:25.123456]`, ISO 8601 with
# an offset or Z (the pod log API's RFC 3339 prefix).
# Also the Hugging Face examples' datefmt, `09/01/2026 10:05:00` (month first: run_clm.py and the other
# examples/pytorch scripts set datefmt="%m/%d/%Y %H:%M:%S").
_STAMP = re.compile(
    r"(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<us>\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2})"
)
_STAMP_WITHIN = 96
_NAMED = re.compile(r"\(\?P<\w+>")
# A read: small enough to stay in the processor's cache while it is searched.
_CHUNK = 1 << 20


def _memmem() -> Any:
    """The C library's memmem, where it has one (glibc's is vectorised)."""
    try:
        found = ctypes.CDLL(None).memmem
    except (OSError, AttributeError, TypeError):
        return None
    found.restype = ctypes.c_void_p
    found.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return found


_MEMMEM = _memmem()


class _Buffer:
    """A read buffer, used again for every read (a new 8 MB bytes object per read cost page faults and a copy
    out of cache: more than the search), and where a word next occurs in it.

    bytes.find skips ahead by a table of the word's letters, which the letters of log text defeat (0.2-1 GB/s
    on a Megatron log); glibc's memmem compares 16 or 32 bytes at once, several times faster
    (benchmarks/bench_checkpoints.py). bytes.find where the C library has no memmem."""

    def __init__(self, size: int) -> None:
        self.data = bytearray(size)
        self.view = memoryview(self.data)
        # Exported to ctypes, the bytearray can no longer be resized: its address stays valid while it lives.
        self.export = ctypes.c_char.from_buffer(self.data) if _MEMMEM is not None else None
        self.base = ctypes.addressof(self.export) if self.export is not None else None

    def read(self, fd: int, size: int, offset: int) -> int:
        """Bytes read into data[:size] from file offset `offset`."""
        return os.preadv(fd, [self.view[:size]], offset)

    def find(self, word: bytes, start: int, end: int) -> int:
        """The offset of `word` in data[start:end] (0 <= start, end <= len(data)), -1 where it is not."""
        if self.base is None:
            return self.data.find(word, start, end)
        if end - start < len(word):
            return -1
        hit = _MEMMEM(self.base + start, end - start, word, len(word))
        return -1 if not hit else hit - self.base


@dataclass(frozen=True)
class Pattern:
    kind: str  # checkpoint | saving | completes | progress | restore
    regex: re.Pattern[str]
    origin: str  # log:<preset> or log:custom
    needles: tuple[bytes, ...] = ()  # words every matching line holds; () for a custom pattern


def patterns(presets: Iterable[str], custom_checkpoint: str, custom_progress: str) -> list[Pattern]:
    out = [Pattern(kind, re.compile(rx), f"log:{name}", NEEDLES[name]) for name in presets
           for kind, rx in PRESETS[name]]
    if custom_checkpoint:
        out.append(Pattern("checkpoint", re.compile(custom_checkpoint), "log:custom"))
    if custom_progress:
        out.append(Pattern("progress", re.compile(custom_progress), "log:custom"))
    return out


def pattern_problem(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        compiled = re.compile(value)
    except re.error as exc:
        return f"not a regular expression: {exc}"
    if "step" not in compiled.groupindex and "time" not in compiled.groupindex:
        return "needs a named group (?P<step>...) (and optionally (?P<time>...))"
    return None


@dataclass
class FileCursor:
    inode: int
    head: str
    offset: int
    last_step: float | None = None
    # The pass ended inside a line longer than max_line_bytes: the next one skips to that line's end.
    skipping: bool = False
    # A hash of the bytes just before `offset`: a file rewritten from its start with the same first line
    # (a requeued job's log opens with the same warnings) is told from one that only grew.
    tail: str = ""


@dataclass
class Line:
    kind: str
    time: float
    step: float | None
    origin: str
    record: str
    save_s: float | None = None


@dataclass
class Read:
    lines: list[Line] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    bytes_read: int = 0


def load_cursors(text: str | None) -> dict[str, FileCursor]:
    if not text:
        return {}
    try:
        data = json.loads(text)
        return {p: FileCursor(int(v[0]), str(v[1]), int(v[2]), None if v[3] is None else float(v[3]), bool(v[4]),
                              str(v[5]))
                for p, v in data.items()}
    except (ValueError, TypeError, IndexError, AttributeError):
        return {}


def dump_cursors(cursors: dict[str, FileCursor]) -> str:
    return json.dumps({p: [c.inode, c.head, c.offset, c.last_step, int(c.skipping), c.tail]
                       for p, c in sorted(cursors.items())},
                      separators=(",", ":"))


_TAIL_BYTES = 256


def _tail(handle: int, offset: int) -> str:
    before = os.pread(handle, min(offset, _TAIL_BYTES), max(0, offset - _TAIL_BYTES))
    return hashlib.sha1(before, usedforsecurity=False).hexdigest()[:16]


def _head(handle: int) -> str:
    first = os.pread(handle, 4096, 0)
    end = first.find(b"\n")
    return hashlib.sha1(first[: end + 1] if end >= 0 else b"", usedforsecurity=False).hexdigest()[:16]


def parse_time(text: str, zone: tzinfo) -> float | None:
    try:
        stamp = datetime.fromisoformat(text.strip().replace(",", "."))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=zone)
        if zone is UTC:
            return stamp.timestamp()  # already in UTC: nothing to move, nothing to overflow
    try:
        return stamp.astimezone(UTC).timestamp()
    except (OverflowError, ValueError):
        return None  # year 1 or 9999 moved past the calendar's end by its offset


def _month_first(text: str, zone: tzinfo) -> float | None:
    try:
        return datetime.strptime(text, "%m/%d/%Y %H:%M:%S").replace(tzinfo=zone).astimezone(UTC).timestamp()
    except (ValueError, OverflowError):
        return None


def _number(text: str) -> float:
    """A step as the line writes it; NaN (quarantined as not a step) where it is not a number."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


def zone_of(name: str) -> tzinfo:
    return UTC if name.upper() == "UTC" else ZoneInfo(name)


class LogReader:
    def __init__(self, found_by: list[Pattern], zone: tzinfo, max_line_bytes: int, max_read_bytes: int) -> None:
        self.found_by = found_by
        self.zone = zone
        self.max_line = max_line_bytes
        self.max_read = max_read_bytes
        # Cheap prefilter: most lines of a training log match no pattern. A word that holds another is not
        # searched for: the lines holding it are among those holding the other.
        words = {n for p in found_by for n in p.needles}
        self.needles = sorted(w for w in words if not any(o != w and o in w for o in words))
        self.buffer = _Buffer(_CHUNK)
        # The custom patterns at once, groups unnamed, over bytes: the few matching lines of a chunk are
        # found without decoding the rest.
        custom = [p for p in found_by if not p.needles]
        combined = "|".join(f"(?:{_NAMED.sub('(?:', p.regex.pattern)})" for p in custom)
        try:
            # MULTILINE: a pattern's ^ and $ mean a line's start and end, as when it runs on the line itself
            self.any_bytes: re.Pattern[bytes] | None = re.compile(combined.encode(), re.MULTILINE) if custom else None
        except re.error:
            # A pattern the combination breaks (a named backreference): every line is looked at.
            self.any_bytes = re.compile(b"^", re.MULTILINE)

    def read(self, path: str, cursor: FileCursor | None, owner: int | None = None) -> tuple[Read, FileCursor | None]:
        """The new lines of a file; with `owner`, only if the file opened belongs to that uid (a job's log is read
        only when it is its user's own: a tenant names any path as its output, and the collector may run as
        root)."""
        out = Read()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return out, cursor
        except OSError as exc:
            out.rejects.append(Reject("checkpoints", path, "path", f"cannot be read: {exc.strerror}"))
            return out, cursor
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                out.rejects.append(Reject("checkpoints", path, "path", "is not a regular file: not read"))
                return out, cursor
            if owner is not None and st.st_uid != owner:
                # Checked on the open file, not the name: a rename between a check and the open changes nothing.
                out.rejects.append(Reject("checkpoints", path, "owner",
                                          f"belongs to uid {st.st_uid}, not to the job's user (uid {owner}): not read"))
                return out, cursor
            head = _head(fd)
            start, last_step, skipping = 0, None, False
            if cursor is not None and cursor.inode == st.st_ino and cursor.offset <= st.st_size and (
                    cursor.offset == 0 or (cursor.head == head and cursor.tail == _tail(fd, cursor.offset))):
                start, last_step, skipping = cursor.offset, cursor.last_step, cursor.skipping
            offset, last_step, skipping = self._lines(fd, path, start, st.st_size, last_step, skipping, out)
            return out, FileCursor(st.st_ino, head, offset, last_step, skipping, _tail(fd, offset))
        finally:
            os.close(fd)

    def _lines(self, fd: int, path: str, start: int, size: int, last_step: float | None, skipping: bool,
               out: Read) -> tuple[int, float | None, bool]:
        """Whole lines from `start`, at most max_read bytes: the offset after the last one, the last step,
        and whether the read ended inside an overlong line. Each read starts at a line's start (a line cut by the
        end of a read is read again with the next, never copied onto it); the words are searched for over the
        whole read at C speed, and only the lines holding one are decoded."""
        offset = start  # file offset of the first byte not consumed
        stop = min(size, start + self.max_read)
        reached = start  # the furthest byte read
        state = _Lines(last_step)
        name = os.path.basename(path)
        # A line longer than a chunk but within max_line is read whole, in one read of max_line + 1 bytes.
        wide: _Buffer | None = None
        while offset < stop:
            buffer = wide or self.buffer
            want = min(len(buffer.data), stop - offset)
            got = buffer.read(fd, want, offset)
            if not got:
                break
            reached = max(reached, offset + got)
            data = buffer.data
            if skipping:
                # Inside an overlong line: only its end is looked for, nothing is kept.
                end = data.find(b"\n", 0, got)
                offset += got if end < 0 else end + 1
                skipping = end < 0
                continue
            last_nl = data.rfind(b"\n", 0, got)
            if last_nl >= 0:
                self._region(buffer, last_nl + 1, offset, name, path, state, out)
                offset += last_nl + 1
                wide = None
            elif got > self.max_line:
                out.rejects.append(self._long(path, offset))
                skipping, wide = True, None
                offset += got
            elif offset + got >= stop or got < want or wide is not None:
                break  # a line not ended yet (or beyond max_read): the next pass reads it
            else:
                wide = _Buffer(self.max_line + 1)
        out.bytes_read += reached - start
        if state.untimed:
            out.rejects.append(Reject("checkpoints", f"{path} (untimed lines)", "time",
                                      f"{state.untimed} checkpoint or step line(s) carry no timestamp: their time is "
                                      "unknown (log with timestamps, or give the custom pattern a (?P<time>) group)"))
        return offset, state.last_step, skipping

    def _long(self, path: str, at: int) -> Reject:
        return Reject("checkpoints", f"{path}@{at}", "line",
                      f"a line longer than checkpoints.max_line_bytes ({self.max_line:,}) skipped unread")

    def _region(self, buffer: _Buffer, size: int, at: int, name: str, path: str, state: _Lines, out: Read) -> None:
        """The matching lines of the whole lines buffer.data[:size], which start at file offset `at`."""
        data = buffer.data
        starts: set[int] = set()
        for needle in self.needles:
            i = buffer.find(needle, 0, size)
            while i >= 0:
                starts.add(data.rfind(b"\n", 0, i) + 1)
                end = data.find(b"\n", i, size)
                i = buffer.find(needle, end + 1, size) if end >= 0 else -1
        if self.any_bytes is not None:
            starts.update(data.rfind(b"\n", 0, m.start()) + 1 for m in self.any_bytes.finditer(data, 0, size))
        for line_start in sorted(starts):
            line_end = data.find(b"\n", line_start, size)
            line_end = size if line_end < 0 else line_end
            if line_end - line_start > self.max_line:
                out.rejects.append(self._long(path, at + line_start))
                continue
            state.feed(self, data[line_start:line_end].decode("utf-8", "replace"), f"{name}@{at + line_start}",
                       out.lines)

    def lines_of(self, texts: Iterable[str], where: str) -> list[Line]:
        """The lines of a log read whole (a pod's, through the API), numbered from 1."""
        state = _Lines(None)
        found: list[Line] = []
        for number, text in enumerate(texts, start=1):
            if len(text) <= self.max_line:
                state.feed(self, text, f"{where}:{number}", found)
        return found

    def _match(self, text: str, record: str, last_step: float | None) -> Iterator[Line]:
        text = text[:MATCH_CHARS]
        for p in self.found_by:
            m = p.regex.search(text)
            if m is None:
                continue
            groups = m.groupdict()
            when: float | None = None
            if groups.get("time"):
                when = parse_time(groups["time"], self.zone)
            if when is None:
                stamp = _STAMP.search(text, 0, min(len(text), m.start() + _STAMP_WITHIN))
                when = None if stamp is None else parse_time(stamp.group("ts"), self.zone) if stamp.group("ts") else (
                    _month_first(stamp.group("us"), self.zone))
            step = _number(groups["step"]) if groups.get("step") else None
            yield Line(p.kind, float("nan") if when is None else when, step, p.origin, record)
            return


@dataclass
class _Lines:
    """What reading a log carries from line to line: the last step reported, a save begun, untimed lines."""

    last_step: float | None
    saving: float | None = None
    saving_step: float | None = None
    untimed: int = 0

    def feed(self, reader: LogReader, text: str, record: str, found: list[Line]) -> None:
        for line in reader._match(text, record, self.last_step):
            if line.time != line.time:  # NaN: the line carries no time
                self.untimed += 1
                continue
            if line.kind == "saving":
                self.saving, self.saving_step = line.time, line.step
                continue
            if line.kind == "completes":
                # A line that ends the pending save (HF's rotation after trainer_state.json) and says nothing alone.
                if self.saving is None:
                    continue
                line.kind = "checkpoint"
            if line.kind == "checkpoint":
                if line.step is None:
                    line.step = self.saving_step if self.saving_step is not None else self.last_step
                if self.saving is not None and line.time >= self.saving:
                    line.save_s = line.time - self.saving
                self.saving = self.saving_step = None
            elif line.step is not None:
                self.last_step = line.step
            found.append(line)
