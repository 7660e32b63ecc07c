"""Victim-to-preemptor links from the slurmctld log, read incrementally.

The log is the only place Slurm names a victim's preemptor:
    [2026-12-02T13:34:15.299] preempted JobId=1 has been requeued to reclaim resources for JobId=2
    [...] preempted JobId=7 has been killed to reclaim resources for JobId=9
    [...] _job_preempt: preempted JobId=7 had to be killed
Job ids print as `123`, `123_4(130)` (array task, raw id in brackets) or
`1+0(1)` (heterogeneous component); the bracketed raw id is dropped so the
id matches the one sacct gives the run.

The cursor is the file's identity (inode and a hash of its first line) and
the byte offset after the last whole line read. A rotated log (renamed to
`<path>.1`, a new file at `<path>`) is finished from the rotated copy first;
a truncated one (copytruncate: same inode, shorter or with another first
line) is read again from its start.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

from preemptlens.errors import SourceError

# ASCII digits only: \d alone also takes other scripts' digits, which no job id has.
_JOB = r"(?a:JobId=(?P<{name}>\d+(?:_\d+|_\[[^\]]*\]|\+\d+)?)(?:\(\d+\))?)"
_RECLAIM = re.compile(
    r"preempted " + _JOB.format(name="victim")
    + r" has been (?P<action>requeued|killed|suspended) to reclaim resources for "
    + _JOB.format(name="preemptor")
)
_HAD_TO_BE_KILLED = re.compile(r"preempted " + _JOB.format(name="victim") + r" had to be killed")
_STAMP = re.compile(r"^\[(?P<ts>[^\]]+)\]")
# A "had to be killed" line without a "reclaim resources" line for the same
# victim this close to it is a link whose preemptor the log does not name.
_SAME_EVENT_S = 5.0
_EMPTY_HEAD = hashlib.sha1(b"", usedforsecurity=False).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class LogLink:
    victim: str
    time: datetime
    preemptor: str | None
    reason: str
    record: str  # file:line for quarantine messages


@dataclass(frozen=True)
class LogCursor:
    inode: int
    head: str
    offset: int
    line: int

    def dump(self) -> str:
        return json.dumps({"inode": self.inode, "head": self.head, "offset": self.offset, "line": self.line})

    @staticmethod
    def load(text: str | None) -> LogCursor | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return LogCursor(int(data["inode"]), str(data["head"]), int(data["offset"]), int(data["line"]))
        except (ValueError, KeyError, TypeError):
            return None  # an unreadable cursor means reading the log from its start


def _head(path: Path) -> str:
    """Hash of the first line: tells a new file from the one the cursor is in."""
    with path.open("rb") as handle:
        first = handle.readline()
    return hashlib.sha1(first if first.endswith(b"\n") else b"", usedforsecurity=False).hexdigest()[:16]


def parse_time(text: str, zone: tzinfo) -> datetime:
    """slurmctld's `[...]` prefix: ISO 8601 in local time (the default
    LogTimeFormat), or with an offset (rfc5424 formats)."""
    stamp = datetime.fromisoformat(text.strip())
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=zone)
    return stamp.astimezone(UTC)


def parse_line(line: str, zone: tzinfo, record: str) -> LogLink | None:
    """A link from one log line, None for any other line; ValueError when the
    line is a preemption line whose time cannot be read."""
    if "preempted JobId=" not in line:
        return None
    match = _RECLAIM.search(line)
    kill = None if match else _HAD_TO_BE_KILLED.search(line)
    if not match and not kill:
        return None
    stamp = _STAMP.match(line)
    if not stamp:
        raise ValueError("no [timestamp] prefix")
    when = parse_time(stamp.group("ts"), zone)
    if match:
        return LogLink(match.group("victim"), when, match.group("preemptor"), match.group("action"), record)
    assert kill is not None
    return LogLink(kill.group("victim"), when, None, "killed", record)


@dataclass
class LogRead:
    links: list[LogLink]
    bad: list[tuple[str, str, str]]  # (record, reason, raw line)
    cursor: LogCursor


def zone_of(name: str) -> tzinfo:
    return UTC if name.upper() == "UTC" else ZoneInfo(name)


def read_log(path: Path, cursor: LogCursor | None, zone: tzinfo) -> LogRead:
    """Read the lines added since `cursor`, across one rotation."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise SourceError(f"slurm: slurmctld log {path} does not exist",
                          "set slurm.ctld_log to SlurmctldLogFile from slurm.conf, or leave it empty") from None
    except PermissionError:
        raise SourceError(f"slurm: permission denied reading {path}",
                          "run as a user that can read SlurmctldLogFile") from None
    links: list[LogLink] = []
    bad: list[tuple[str, str, str]] = []
    start, line_no = 0, 0
    head = _head(path)
    if cursor is not None:
        if cursor.inode != stat.st_ino:
            rotated = _rotated_copy(path, cursor.inode)
            if rotated is not None:
                _read_from(rotated, cursor.offset, cursor.line, zone, links, bad)
        elif cursor.offset <= stat.st_size and cursor.head in (head, _EMPTY_HEAD):
            start, line_no = cursor.offset, cursor.line
    offset, line_no = _read_from(path, start, line_no, zone, links, bad)
    if head == _EMPTY_HEAD:
        head = _head(path)
    return LogRead(_drop_echoes(links), bad, LogCursor(stat.st_ino, head, offset, line_no))


def _rotated_copy(path: Path, inode: int) -> Path | None:
    for candidate in sorted(path.parent.glob(path.name + ".*")):
        try:
            if candidate.stat().st_ino == inode:
                return candidate
        except OSError:
            continue
    return None


def _read_from(path: Path, offset: int, line_no: int, zone: tzinfo,
               links: list[LogLink], bad: list[tuple[str, str, str]]) -> tuple[int, int]:
    """Read whole lines from `offset`; return the offset after the last one."""
    try:
        handle = path.open("rb")
    except PermissionError:
        raise SourceError(f"slurm: permission denied reading {path}",
                          "run as a user that can read SlurmctldLogFile") from None
    with handle:
        handle.seek(offset)
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a line still being written: read it next time
            offset += len(raw)
            line_no += 1
            line = raw.decode("utf-8", errors="replace")
            record = f"{path.name}:{line_no}"
            try:
                link = parse_line(line, zone, record)
            except ValueError as exc:
                bad.append((record, str(exc), line.rstrip("\n")))
                continue
            if link is not None:
                links.append(link)
    return offset, line_no


def _drop_echoes(links: list[LogLink]) -> list[LogLink]:
    named = [lk for lk in links if lk.preemptor is not None]
    kept = list(named)
    for lk in links:
        if lk.preemptor is None and not any(
            n.victim == lk.victim and abs((n.time - lk.time).total_seconds()) <= _SAME_EVENT_S for n in named
        ):
            kept.append(lk)
    return sorted(kept, key=lambda lk: (lk.time, lk.victim))
