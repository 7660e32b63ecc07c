"""Stream `files`: checkpoints on shared storage, under configured roots only.

A root is a path that names a job, in one of two ways:
- a template of the job's fields, `/scratch/{user}/{job_id}` (fields: job_id, user, team, name): each
  recorded job's directory is that path;
- a directory or glob with a rule, `job = "work_dir"` or `"stdout"`: a directory it matches belongs to
  the jobs whose recorded working directory (or output file's directory) is it or one of its parents,
  and a checkpoint to the one of them that was running when it was written.
A directory found by what a job's record says (its name, working directory or output file, which its user
writes) is walked for that job only if its user owns it (uid by the recorded user name).
Below a job's directory, directories are walked `max_depth` levels down and every layout
(layouts.py) is looked for. Nothing outside a root is read: symlinks are never followed (a symlink
is skipped, named in quarantine), and a directory whose real path leaves the root is skipped.

Incremental: the cursor keeps, per directory walked, its modification time, the subdirectories to
walk and the checkpoints already sent. A directory whose time has not changed is not listed again
(its subdirectories are still looked at); one that holds a save in progress or checkpoint files
(a Lightning `last.ckpt` is rewritten in place, which does not touch its directory) is listed
every pass.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from preemptlens.collectors.checkpoints.jobs import Point, Runs
from preemptlens.collectors.checkpoints.layouts import Entry, Listing, detect, detectors, new_tuple
from preemptlens.contract import Reject

_FIELDS = ("job_id", "user", "team", "name")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_GLOB = re.compile(r"[*?\[]")
# The time of an entry that is not a file: never read.
_NOT_LOOKED_UP = float("nan")
# A marker file read to tell the latest checkpoint (a tracker, DeepSpeed's `latest`) holds a few bytes.
SMALL_FILE_BYTES = 4096


@dataclass(frozen=True)
class Root:
    path: str  # template or glob as configured
    job: str  # "path" (placeholders name the job), "work_dir" or "stdout"

    @property
    def tenant_named(self) -> bool:
        """Whether a job's directory comes from what the job's own record says (its name, working directory or
        output file, which its user sets): then only a directory its user owns is walked."""
        return self.job != "path" or "{name}" in self.path

    @property
    def base(self) -> str:
        """The fixed part of the path before any placeholder or wildcard: nothing outside it is read."""
        cut = len(self.path)
        for pattern in (_PLACEHOLDER, _GLOB):
            m = pattern.search(self.path)
            if m:
                cut = min(cut, m.start())
        head = self.path[:cut]
        return os.path.normpath(head if head.endswith("/") else os.path.dirname(head) or "/")


def root_problem(value: object) -> str | None:
    """What is wrong with one `checkpoints.roots` entry, None when it fits."""
    if not isinstance(value, dict):
        return "expected a table {path = \"...\", job = \"path\" | \"work_dir\" | \"stdout\"}"
    path, job = value.get("path"), value.get("job", "path")
    if set(value) - {"path", "job"}:
        return f"unknown keys {sorted(set(value) - {'path', 'job'})}"
    if not isinstance(path, str) or not path.startswith("/"):
        return "path must be an absolute path"
    if job not in ("path", "work_dir", "stdout"):
        return "job must be path, work_dir or stdout"
    unknown = [f for f in _PLACEHOLDER.findall(path) if f not in _FIELDS]
    if unknown:
        return f"unknown placeholders {unknown} (known: {', '.join(_FIELDS)})"
    if job == "path" and "{job_id}" not in path and "{name}" not in path:
        return "a path that names the job needs {job_id} or {name}"
    if os.path.normpath(Root(path, job).base) == "/":
        return "the fixed part of path must not be / (name the storage the checkpoints are on)"
    return None


@dataclass
class Cursor:
    # dir path -> [mtime_ns, listed each pass (0/1), [subdirectories], {checkpoint name: time sent}]
    dirs: dict[str, list[object]] = field(default_factory=dict)

    def dump(self) -> str:
        # orjson writes the same text as json several times faster (a first pass keeps every directory walked);
        # json writes what orjson refuses (an integer past 64 bits). The fastest compression: the text is one
        # copy of the tree's names, and the cursor is written once a pass.
        try:
            raw = orjson.dumps(self.dirs)
        except orjson.JSONEncodeError:
            raw = json.dumps(self.dirs, separators=(",", ":")).encode()
        return "z:" + base64.b64encode(zlib.compress(raw, 1)).decode()

    @staticmethod
    def load(text: str | None) -> Cursor:
        if not text:
            return Cursor()
        try:
            raw = zlib.decompress(base64.b64decode(text[2:])) if text.startswith("z:") else text.encode()
            data = json.loads(raw)
            return Cursor(data if isinstance(data, dict) else {})
        except (ValueError, zlib.error):
            return Cursor()  # an unreadable cursor means walking everything again: loads are idempotent


@dataclass
class Scan:
    rows: list[Point] = field(default_factory=list)  # kind checkpoint
    rejects: list[Reject] = field(default_factory=list)
    dirs_listed: int = 0
    dirs_seen: int = 0


class Walker:
    def __init__(self, roots: list[Root], layouts: list[str], keras_templates: list[str], max_depth: int,
                 max_dirs: int) -> None:
        self.roots = roots
        self.found_by = detectors(layouts, keras_templates)
        self.max_depth = max_depth
        self.max_dirs = max_dirs

    def scan(self, cluster: str, runs: Runs, cursor: Cursor) -> tuple[Scan, Cursor]:
        out = Scan()
        new = Cursor()
        folders: dict[str, str] = {}
        for root in self.roots:
            base = os.path.realpath(root.base)
            for job_dir, jobs in self._job_dirs(cluster, root, runs, out):
                if out.dirs_seen >= self.max_dirs:
                    out.rejects.append(Reject("checkpoints", f"files {root.path}", "path",
                                              f"more than checkpoints.max_dirs ({self.max_dirs:,}) directories "
                                              "in one pass; the rest waits for the next"))
                    return out, _carry(cursor, new)
                real = real_path(job_dir, folders)
                if not _within(real, base):
                    out.rejects.append(Reject("checkpoints", job_dir, "path",
                                              f"leaves the configured root {root.base} (a symlink?): not read"))
                    continue
                if root.tenant_named:
                    jobs = self._owners(cluster, job_dir, jobs, runs, out)
                    if not jobs:
                        continue
                self._walk(cluster, job_dir, real, jobs, base, runs, cursor, new, out, 0)
        return out, new

    def _job_dirs(self, cluster: str, root: Root, runs: Runs, out: Scan) -> Iterator[tuple[str, list[str]]]:
        if root.job == "path":
            for (c, job_id), job in sorted(runs.jobs.items()):
                if c != cluster:
                    continue
                values = {"job_id": job.job_id, "user": job.user, "team": job.team, "name": job.name}
                if any(values[f] is None for f in _PLACEHOLDER.findall(root.path)):
                    continue
                # A value holding a path separator or `..` would move the path elsewhere.
                if any(v is not None and ("/" in v or v in (".", "..") or "\0" in v) for v in values.values()):
                    continue
                path = _fill(root.path, values)
                for match in _matches(path):
                    yield os.path.normpath(match), [job_id]
            return
        owners = runs.by_dir(cluster, root.job)
        for match in _matches(root.path):
            folder = os.path.normpath(match)
            # The deepest recorded directory at or above the match owns it.
            probe = folder
            while True:
                if probe in owners:
                    yield folder, owners[probe]
                    break
                parent = os.path.dirname(probe)
                if parent == probe:
                    break
                probe = parent

    def _walk(self, cluster: str, folder: str, real: str, jobs: list[str], base: str, runs: Runs, old: Cursor,
              new: Cursor, out: Scan, depth: int) -> None:
        """Walk `folder`, whose real path is `real` (a directory below it that lstat saw as one, not a symlink, is
        its real path's child: no path is resolved again)."""
        out.dirs_seen += 1
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return
        except OSError as exc:
            out.rejects.append(Reject("checkpoints", folder, "path", f"cannot be read: {exc.strerror}"))
            return
        if stat.S_ISLNK(st.st_mode):
            out.rejects.append(Reject("checkpoints", folder, "path", "is a symlink: not followed"))
            return
        if not stat.S_ISDIR(st.st_mode):
            return
        known = old.dirs.get(folder)
        sent: dict[str, float] = dict(known[3]) if known else {}  # type: ignore[call-overload]
        if known and known[0] == st.st_mtime_ns and not known[1]:
            new.dirs[folder] = known
            for child in known[2]:  # type: ignore[attr-defined]
                if depth + 1 <= self.max_depth:
                    self._walk(cluster, f"{folder}/{child}", f"{real}/{child}", jobs, base, runs, old, new, out,
                               depth + 1)
            return
        out.dirs_listed += 1
        entries = _list(folder, out)
        if entries is None:
            return
        listing = Listing(entries, _Below(folder, out).__getitem__, lambda name: _read_small(f"{folder}/{name}"))
        result = detect(listing, self.found_by)
        # One job's directory (a path template) has one owner: asked once, not for every checkpoint in it.
        only = jobs[0] if len(jobs) == 1 else None
        rows, run_at = out.rows, runs.run_at
        for found in result.found:
            name, t = found.name, found.time
            if sent.get(name) == t:
                continue
            job_id = only if only is not None else self._owner(cluster, jobs, runs, t)
            record = f"{folder}/{name}"
            if job_id is None:
                out.rejects.append(Reject("checkpoints", record, "job_id",
                                          f"no run of {', '.join(jobs)} was on when it was written"))
                continue
            rows.append(new_tuple(Point, (job_id, run_at(cluster, job_id, t), t, "checkpoint", found.step, found.save_s,
                                     f"files:{found.layout}", record)))
            sent[name] = t
        # One look at each entry: what to walk below, whether the directory must be listed again next pass (it holds
        # a checkpoint file, which a save may rewrite in place), and what is named but never followed.
        claimed = result.claimed
        children: list[str] = []
        hot = bool(result.pending)
        for e in entries:
            if e.name in claimed:
                hot = hot or e.is_file
            elif e.is_dir:
                children.append(e.name)
            elif not e.is_file:
                # lstat said neither: a symlink (or a device); named, never followed.
                out.rejects.append(Reject("checkpoints", f"{folder}/{e.name}", "path",
                                          "is a symlink (or not a file): not followed"))
        children.sort()
        new.dirs[folder] = [st.st_mtime_ns, int(hot), children, sent]
        if depth + 1 > self.max_depth:
            return
        for child in children:
            if not _within(f"{real}/{child}", base):
                continue
            self._walk(cluster, f"{folder}/{child}", f"{real}/{child}", jobs, base, runs, old, new, out, depth + 1)

    @staticmethod
    def _owners(cluster: str, folder: str, jobs: list[str], runs: Runs, out: Scan) -> list[str]:
        """Of the jobs a directory was found for by what their records say (a job's name, working directory or
        output file: a tenant writes those), the ones whose user owns it: another user's directory is not walked."""
        try:
            owner = os.lstat(folder).st_uid
        except OSError:
            return jobs  # missing or unreadable: the walk says so
        mine = [j for j in jobs if runs.uid(runs.jobs[(cluster, j)]) == owner]
        if not mine:
            out.rejects.append(Reject("checkpoints", folder, "owner",
                                      f"belongs to uid {owner}, not to the user of job {', '.join(jobs)}: not read"))
        return mine

    @staticmethod
    def _owner(cluster: str, jobs: list[str], runs: Runs, t: float) -> str | None:
        """Of several jobs sharing a directory, the one that was on at t; None when not exactly one was."""
        on = runs.on_at(cluster, jobs, t)
        return on[0] if len(on) == 1 else None


def _fill(template: str, values: dict[str, str | None]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] or "", template)


def _carry(old: Cursor, new: Cursor) -> Cursor:
    """A pass cut short keeps what it did not reach as it was."""
    merged = dict(old.dirs)
    merged.update(new.dirs)
    return Cursor(merged)


def real_path(path: str, folders: dict[str, str]) -> str:
    """os.path.realpath(path), its folder resolved once (`folders` keeps them: the paths of many jobs share a
    folder, and resolving a path looks up each of its parts)."""
    folder, name = os.path.split(path)
    if name in ("", ".", "..") or "//" in path:
        return os.path.realpath(path)
    if folder not in folders:
        folders[folder] = os.path.realpath(folder)
    joined = f"{folders[folder].rstrip('/')}/{name}"
    try:
        if stat.S_ISLNK(os.lstat(joined).st_mode):
            return os.path.realpath(path)
    except OSError:
        pass  # missing or unreadable: as realpath, the name itself
    return joined


def _within(real: str, base: str) -> bool:
    """Whether a real path (symlinks resolved) is the real path `base` or below it."""
    return real == base or real.startswith(base.rstrip("/") + "/")


def _matches(pattern: str) -> list[str]:
    if not _GLOB.search(pattern):
        return [pattern]
    # Sorted: the same tree gives the same pass; glob itself does not descend through a symlink's target
    # any further than the pattern says, and every match is checked against the root after.
    return sorted(glob.glob(pattern))


class _Below(dict[str, list[Entry] | None]):
    """The listings of a directory's subdirectories, each listed on first use: layouts look into the same one more
    than once (is it complete, when was it written), and a second look is a plain dict lookup."""

    def __init__(self, folder: str, out: Scan) -> None:
        super().__init__()
        self.folder = folder
        self.out = out

    def __missing__(self, name: str) -> list[Entry] | None:
        entries = self[name] = _list(f"{self.folder}/{name}", self.out, quiet=True)
        return entries


def _list(folder: str, out: Scan, quiet: bool = False) -> list[Entry] | None:
    entries: list[Entry] = []
    append = entries.append
    try:
        with os.scandir(folder) as it:
            for d in it:
                # The entry's type as the directory gives it (lstat only where the file system does not say):
                # only a file is looked up, for its time and size. Files first: most entries of a checkpoint tree
                # are.
                try:
                    if d.is_file(follow_symlinks=False):
                        st = d.stat(follow_symlinks=False)
                        append(new_tuple(Entry, (d.name, False, True, st.st_mtime, st.st_size)))
                    elif d.is_dir(follow_symlinks=False):
                        append(new_tuple(Entry, (d.name, True, False, _NOT_LOOKED_UP, 0)))
                    else:
                        append(new_tuple(Entry, (d.name, False, False, _NOT_LOOKED_UP, 0)))
                except OSError:
                    continue
    except FileNotFoundError:
        return None
    except OSError as exc:
        if not quiet:
            out.rejects.append(Reject("checkpoints", folder, "path", f"cannot be listed: {exc.strerror}"))
        return None
    return entries


def _read_small(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, SMALL_FILE_BYTES).decode("utf-8", "replace")
    finally:
        os.close(fd)


def root_of(value: dict[str, str]) -> Root:
    return Root(str(value["path"]).rstrip("/") or "/", str(value.get("job", "path")))
