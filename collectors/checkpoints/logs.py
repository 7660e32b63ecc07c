"""Stream `logs`: checkpoint, restore and step lines of a job's training log.

Which lines count comes from presets, one per framework, each a regular
expression over the framework's own message (sources below), plus a custom
pattern per site (named groups `step` and optionally `time`). A line's time
is its own: the `time` group, else a timestamp near its start (Python
logging's asctime, Megatron's `[%Y-%m-%d %H:%M:%S.%f]`, ISO 8601, the
`timestamps=true` prefix of Kubernetes pod logs); a line without one cannot
say when the save happened and is counted in one quarantine row per file.

Kinds of line: `checkpoint` (a save completed: a `checkpoints` row of kind
checkpoint), `saving` (a save began: with the next checkpoint line, its
save_s), `progress` (a step reached) and `restore` (a checkpoint loaded at a
step: a progress row at that step, which is how a restart tells which
checkpoint it resumed from, the rollback basis).

Sources of the presets:
- hf_trainer: transformers src/transformers/trainer.py `_save` logs "Saving model checkpoint to
  {output_dir}" (output_dir ending checkpoint-<global_step>); on resume "Continuing training from global
  step {global_step}".
- lightning: Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/model_checkpoint.py "Epoch {e},
  global step {s}: ... saving model to {filepath!r}"; trainer/connectors/checkpoint_connector.py "Restored
  all states from the checkpoint at {path}" (the step then from the path's `step=`).
- megatron: NVIDIA/Megatron-LM megatron/training/checkpointing.py "saving checkpoint at iteration {:7d}",
  "successfully saved checkpoint from iteration {:7d}", "successfully loaded checkpoint from ... at iteration
  {N}"; megatron/training/training.py " iteration {:8d}/{:8d} |".
- deepspeed: microsoft/DeepSpeed deepspeed/runtime/engine.py "Saving model checkpoint: {save_path}" (a
  global_step<N> path), "step={step}, skipped=..."; checkpoint_engine/torch_checkpoint_engine.py
  "[Torch] Checkpoint {tag} is ready now!".
- torchtitan: pytorch/torchtitan torchtitan/components/checkpointer/dcp.py "Saving the checkpoint.",
  "Loading the checkpoint from .../step-<N>."; torchtitan/components/metrics.py "step: {step}  loss: ...".
  Its save line names no step: it takes the last step the same log reported.
- keras: keras-team/keras keras/src/callbacks/model_checkpoint.py "Epoch {epoch}: saving model to {filepath}"
  and "finished saving model to" (the epoch is the step).

Incremental: the cursor per file is its inode, a hash of its first line, the
byte offset after the last whole line read and the last step it reported. A
file replaced (another inode) or truncated (shorter, or another first line)
is read again from its start. A pass reads at most `max_read_bytes` of a
file and a line longer than `max_line_bytes` is skipped unread past that
bound (one quarantine row names the file and the offset), so a 10 GB line
costs one buffer, not 10 GB of memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from preemptlens.contract import Reject

PRESETS: dict[str, tuple[tuple[str, str], ...]] = {
    "hf_trainer": (
        ("checkpoint", r"Saving model checkpoint to \S*checkpoint-(?P<step>\d+)"),
        ("restore", r"Continuing training from global step (?P<step>\d+)"),
    ),
    "lightning": (
        ("checkpoint", r"Epoch \d+, global step (?P<step>\d+): .*saving model to"),
        ("restore", r"Restored all states from the checkpoint at \S*step=(?P<step>\d+)"),
    ),
    "megatron": (
        ("saving", r"saving checkpoint at iteration\s+(?P<step>\d+)"),
        ("checkpoint", r"successfully saved checkpoint from iteration\s+(?P<step>\d+)"),
        ("restore", r"successfully loaded checkpoint from .* at iteration (?P<step>\d+)"),
        ("progress", r"\biteration\s+(?P<step>\d+)/\s*\d+ \|"),
    ),
    "deepspeed": (
        ("saving", r"Saving model checkpoint: \S*global_step(?P<step>\d+)"),
        ("checkpoint", r"\[Torch\] Checkpoint global_step(?P<step>\d+) is ready now!"),
        ("progress", r"\bstep=(?P<step>\d+), skipped="),
    ),
    "torchtitan": (
        ("saving", r"\bSaving the checkpoint\."),
        ("checkpoint", r"\bFinished saving the checkpoint\b|\bLast step checkpoint completed\b"),
        ("restore", r"Loading the checkpoint from \S*step-(?P<step>\d+)"),
        ("progress", r"\bstep:\s*(?P<step>\d+)\s+loss:"),
    ),
    "keras": (
        ("saving", r"Epoch (?P<step>\d+): saving model to"),
        ("checkpoint", r"Epoch (?P<step>\d+): finished saving model to"),
    ),
}

# A timestamp near a line's start: `2026-12-04 19:32:25,123`, `[2026-12-04 19:32:25.123456]`, ISO 8601 with
# an offset or Z (the pod log API's RFC 3339 prefix).
_STAMP = re.compile(
    r"(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)"
)
_STAMP_WITHIN = 96
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Pattern:
    kind: str  # checkpoint | saving | progress | restore
    regex: re.Pattern[str]
    origin: str  # log:<preset> or log:custom


def patterns(presets: Iterable[str], custom_checkpoint: str, custom_progress: str) -> list[Pattern]:
    out = [Pattern(kind, re.compile(rx), f"log:{name}") for name in presets for kind, rx in PRESETS[name]]
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
        return {p: FileCursor(int(v[0]), str(v[1]), int(v[2]), None if v[3] is None else float(v[3]), bool(v[4]))
                for p, v in data.items()}
    except (ValueError, TypeError, IndexError, AttributeError):
        return {}


def dump_cursors(cursors: dict[str, FileCursor]) -> str:
    return json.dumps({p: [c.inode, c.head, c.offset, c.last_step, int(c.skipping)]
                       for p, c in sorted(cursors.items())},
                      separators=(",", ":"))


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
    return stamp.astimezone(UTC).timestamp()


def zone_of(name: str) -> tzinfo:
    return UTC if name.upper() == "UTC" else ZoneInfo(name)


class LogReader:
    def __init__(self, found_by: list[Pattern], zone: tzinfo, max_line_bytes: int, max_read_bytes: int) -> None:
        self.found_by = found_by
        self.zone = zone
        self.max_line = max_line_bytes
        self.max_read = max_read_bytes
        # Cheap prefilter: most lines of a training log match no pattern.
        combined = "|".join(f"(?:{p.regex.pattern})" for p in found_by)
        self.any = re.compile(combined) if found_by else None
        # The same over bytes, to find the few matching lines of a chunk without decoding the rest.
        self.any_bytes = re.compile(combined.encode()) if found_by else None

    def read(self, path: str, cursor: FileCursor | None) -> tuple[Read, FileCursor | None]:
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
            head = _head(fd)
            start, last_step, skipping = 0, None, False
            if cursor is not None and cursor.inode == st.st_ino and cursor.offset <= st.st_size and (
                    cursor.head == head or cursor.offset == 0):
                start, last_step, skipping = cursor.offset, cursor.last_step, cursor.skipping
            offset, last_step, skipping = self._lines(fd, path, start, st.st_size, last_step, skipping, out)
            return out, FileCursor(st.st_ino, head, offset, last_step, skipping)
        finally:
            os.close(fd)

    def _lines(self, fd: int, path: str, start: int, size: int, last_step: float | None, skipping: bool,
               out: Read) -> tuple[int, float | None, bool]:
        """Whole lines from `start`, at most max_read bytes: the offset after the last one, the last step,
        and whether the read ended inside an overlong line. Matching runs over each chunk at C speed; only
        a line the combined pattern matches is decoded."""
        offset = start  # file offset of the first byte not consumed
        stop = min(size, start + self.max_read)
        pending = b""
        state = _Lines(last_step)
        name = os.path.basename(path)
        while offset + len(pending) < stop:
            chunk = os.pread(fd, min(_CHUNK, stop - offset - len(pending)), offset + len(pending))
            if not chunk:
                break
            out.bytes_read += len(chunk)
            buffer = pending + chunk
            last_nl = buffer.rfind(b"\n")
            if last_nl < 0:
                pending = buffer
                if len(pending) > self.max_line:
                    if not skipping:
                        out.rejects.append(self._long(path, offset))
                    skipping = True
                    offset += len(pending)
                    pending = b""
                continue
            region = memoryview(buffer)[: last_nl + 1]
            begin = 0
            if skipping:
                # The rest of an overlong line read before: drop it up to its end.
                begin = buffer.find(b"\n") + 1
                skipping = False
            self._region(bytes(region[begin:]), offset + begin, name, path, state, out)
            offset += last_nl + 1
            pending = buffer[last_nl + 1:]
            if len(pending) > self.max_line:
                out.rejects.append(self._long(path, offset))
                skipping = True
                offset += len(pending)
                pending = b""
        if state.untimed:
            out.rejects.append(Reject("checkpoints", f"{path} (untimed lines)", "time",
                                      f"{state.untimed} checkpoint or step line(s) carry no timestamp: their time is "
                                      "unknown (log with timestamps, or give the custom pattern a (?P<time>) group)"))
        return offset, state.last_step, skipping

    def _long(self, path: str, at: int) -> Reject:
        return Reject("checkpoints", f"{path}@{at}", "line",
                      f"a line longer than checkpoints.max_line_bytes ({self.max_line:,}) skipped unread")

    def _region(self, region: bytes, at: int, name: str, path: str, state: _Lines, out: Read) -> None:
        """The matching lines of a run of whole lines starting at file offset `at`."""
        if self.any_bytes is None:
            return
        done = -1
        for m in self.any_bytes.finditer(region):
            line_start = region.rfind(b"\n", 0, m.start()) + 1
            if line_start <= done:
                continue
            line_end = region.find(b"\n", m.end())
            line_end = len(region) if line_end < 0 else line_end
            done = line_start
            if line_end - line_start > self.max_line:
                out.rejects.append(self._long(path, at + line_start))
                continue
            state.feed(self, region[line_start:line_end].decode("utf-8", "replace"), f"{name}@{at + line_start}",
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
        if self.any is None or not self.any.search(text):
            return
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
                when = parse_time(stamp.group("ts"), self.zone) if stamp else None
            step = float(groups["step"]) if groups.get("step") else None
            kind = "progress" if p.kind == "restore" else p.kind
            yield Line(kind, float("nan") if when is None else when, step, p.origin, record)
            return


@dataclass
class _Lines:
    """What reading a log carries from line to line: the last step reported, a save begun, untimed lines."""

    last_step: float | None
    saving: float | None = None
    untimed: int = 0

    def feed(self, reader: LogReader, text: str, record: str, found: list[Line]) -> None:
        for line in reader._match(text, record, self.last_step):
            if line.time != line.time:  # NaN: the line carries no time
                self.untimed += 1
                continue
            if line.kind == "saving":
                self.saving = line.time
                continue
            if line.kind == "checkpoint":
                if line.step is None:
                    line.step = self.last_step
                if self.saving is not None and line.time >= self.saving:
                    line.save_s = line.time - self.saving
                self.saving = None
            if line.step is not None:
                self.last_step = line.step
            found.append(line)
