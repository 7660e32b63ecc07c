"""Files preemptlens writes are its service user's alone.

The warehouse, its snapshot, the Parquet lake, the weekly reports and every
temporary folder hold job ids, team and user names of every team, which the
dashboard shows each reader only as their role allows. On a shared login node
any user could read them around that, so they are created private: folders
0700, files 0600. The command line sets the process's umask to 077 before it
does anything (so does everything it starts: the dashboard, a query's child),
and the writers below also set the mode themselves, so a library caller with
a looser umask gets private files too. A warehouse made 0644 by an older
version is narrowed the next time a writer opens it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import time
import uuid
from pathlib import Path

from preemptlens.errors import PreemptlensError

log = logging.getLogger(__name__)

UMASK = 0o077
FILE_MODE = 0o600
FOLDER_MODE = 0o700


def private_umask() -> None:
    """The process creates private files and folders from now on (its children inherit it)."""
    os.umask(UMASK)


def make_private(path: str | Path) -> None:
    """Narrow `path` (a file, or a folder) to its owner, when this process owns it; a path owned by someone
    else (a folder an operator made) is left as it is."""
    with contextlib.suppress(OSError):
        info = os.stat(path, follow_symlinks=False)
        if info.st_uid != os.geteuid() or stat.S_ISLNK(info.st_mode):
            return
        wanted = FOLDER_MODE if stat.S_ISDIR(info.st_mode) else FILE_MODE
        if stat.S_IMODE(info.st_mode) & ~wanted:
            os.chmod(path, stat.S_IMODE(info.st_mode) & wanted)


def private_folder(path: str | Path) -> Path:
    """`path` as a folder, made (with its missing parents) private; an existing folder keeps its mode."""
    folder = Path(path)
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    for made in missing:
        make_private(made)
    return folder


_WARNED: set[str] = set()


def warn_if_exposed(folder: str | Path, what: str) -> None:
    """Log once per process when others may list or change `folder` (where the warehouse lives)."""
    resolved = str(Path(folder).resolve())
    if resolved in _WARNED:
        return
    _WARNED.add(resolved)
    exposed = exposure(Path(resolved))
    if exposed:
        log.warning("%s %s is %s: other users can see or replace what is in it; chmod 700 it (docs/deploy.md)",
                    what, resolved, exposed)


# -- paths others could change ------------------------------------------------
#
# preemptlens often runs as root (slurm.bin_dir's programs, the collectors that read every job's files). A path
# it writes, keeps state in, reads a secret from or executes is only its own when no other user can replace it:
# neither the path itself nor any folder above it may belong to another user, and none may be writable by other
# users (a folder above may be when it is sticky, like /tmp: then only the owner of an entry can rename it, and
# that owner is checked one level down). Both the path as written and the path its symlinks lead to are checked:
# a symlink in a folder others can write can be pointed elsewhere.


class UnsafePath(PreemptlensError):
    """A path preemptlens would write, read a secret from or run is one another user can change."""


def exposure(path: Path) -> str:
    """Who besides its owner may read or change `path` (a file or folder), in words; empty when nobody
    (or when it cannot be looked at: whoever reads it next says why)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return ""
    found = []
    if mode & stat.S_IROTH:
        found.append("readable by every user")
    if mode & stat.S_IWOTH:
        found.append("writable by every user")
    if mode & stat.S_IWGRP:
        found.append("writable by its group")
    return " and ".join(found)


def _trusted_uids() -> tuple[int, int]:
    return 0, os.geteuid()


def _chain_problem(chain: Path) -> str:
    """Why another user could change `chain` (an absolute path) or a folder above it; empty when none can. The
    last component itself may not be writable by others even when it is a sticky folder (others could add to
    it)."""
    for depth, part in enumerate([chain, *chain.parents]):
        try:
            info = os.lstat(part)
        except OSError:
            continue  # not made yet (its folder decides who could make it), or not ours to see: using it says why
        if info.st_uid not in _trusted_uids():
            return f"{part} belongs to another user (uid {info.st_uid})"
        if stat.S_ISLNK(info.st_mode):
            continue  # a symlink's own mode means nothing; who may replace it is its folder's business
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            sticky_folder = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
            if depth == 0 or not sticky_folder:
                who = "every user" if info.st_mode & stat.S_IWOTH else "its group"
                return f"{part} is writable by {who}"
    return ""


def others_can_change(path: str | Path) -> str:
    """Why another user could change what `path` names (replace it, write into it, or swap a folder above it),
    in words naming the part at fault; empty when only root and this process's user can."""
    absolute = Path(os.path.abspath(path))
    problem = _chain_problem(absolute)
    real = Path(os.path.realpath(absolute))
    if not problem and real != absolute:
        problem = _chain_problem(real)
    return problem


def refuse_if_others_can_change(path: str | Path, what: str, hint: str) -> None:
    """UnsafePath naming `what` when another user could change `path` (see others_can_change)."""
    problem = others_can_change(path)
    if problem:
        raise UnsafePath(f"{what} {path}: {problem}, so another user could change it", hint)


# -- files created exclusively --------------------------------------------------

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP = re.compile(r"^\..+\.[0-9a-f]{32}\.tmp$")


def temp_path(target: Path) -> Path:
    """A fresh name beside `target` for the file that will replace it: hidden, unguessable, and recognised
    by remove_own_temps when a run is interrupted before the rename."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")


def create_new(path: str | Path) -> int:
    """A descriptor of a new private file at `path`, never one that was there: no symlink followed, nothing
    opened that another user planted (FileExistsError instead)."""
    fd = os.open(path, _NEW, FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # whatever the umask
    return fd


def replace_privately(target: str | Path, data: bytes) -> None:
    """Write `data` as `target`'s new content: into a new private file beside it (create_new), then renamed over
    it, so a reader sees the old file or the new one and a planted name is never written through."""
    target = Path(target)
    temp = temp_path(target)
    fd = create_new(temp)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def remove_own_temps(folder: str | Path, *, recursive: bool = False, older_than_s: float = 0.0) -> None:
    """Delete the temporary files (temp_path's names) an interrupted run left in `folder` (and, when
    `recursive`, in the folders under it, symlinks not followed); only regular files of this process's user,
    last changed more than `older_than_s` ago (a writer that holds no lock may have one in hand now)."""
    removed = []
    before = time.time() - older_than_s
    for base, folders, files in os.walk(folder, followlinks=False):
        for name in files:
            if not _TEMP.match(name):
                continue
            path = Path(base) / name
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and info.st_mtime <= before:
                    path.unlink()
                    removed.append(path)
        if not recursive:
            folders.clear()
    if removed:
        log.info("removed %d temporary file(s) an interrupted run left in %s", len(removed), folder)


def open_lock(path: str | Path) -> int:
    """A descriptor of the lock file `path` (made private if missing), for flock: never a FIFO or device, whose
    open could block or do what its owner wants, nor a symlink or a file of another user."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        # ELOOP: a symlink; ENXIO: a FIFO nobody reads.
        raise UnsafePath(f"lock file {path} cannot be opened as a plain file ({exc.strerror})",
                         f"remove {path}: preemptlens makes it again") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        kind = "a regular file" if stat.S_ISREG(info.st_mode) else "not a regular file"
        raise UnsafePath(f"lock file {path} is {kind} of uid {info.st_uid}, not this user's own file",
                         f"remove {path}: preemptlens makes it again")
    return fd
