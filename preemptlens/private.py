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
import stat
from pathlib import Path

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
    from preemptlens.config import exposure

    resolved = str(Path(folder).resolve())
    if resolved in _WARNED:
        return
    _WARNED.add(resolved)
    exposed = exposure(Path(resolved))
    if exposed:
        log.warning("%s %s is %s: other users can see or replace what is in it; chmod 700 it (docs/deploy.md)",
                    what, resolved, exposed)
