"""Every Python process preemptlens starts reads code only from where Python and preemptlens are installed.

`python -m module` and `python -c code` put the working directory first on sys.path, ahead of the standard
library: a `json.py` or a `preemptlens/` folder planted in the folder `serve` (or `dashboard`, or `sql`) was
started from would run as the service's user. preemptlens starts Python in three ways: the dashboard
(`python -m preemptlens.dashboards.launch`), multiprocessing's fork server and resource tracker behind ad-hoc
SQL (`python -c ...`, preemptlens.queryserver), and Spark's Python workers (`python -m pyspark.daemon`, started
by the JVM). The first is started here with `-P`; all of them inherit the environment `isolate` gives this
process: PYTHONSAFEPATH (the same as `-P`, for command lines preemptlens does not write) and the path
variables without the entries that name the working directory.

Not `-I`: it would also drop PYTHONPATH, through which a checkout run in place (and the test suite) finds its
own preemptlens ahead of an installed one; an editable install is found either way (its path hook lives in
site-packages). PYTHONPATH's absolute entries are the operator's own choice and kept.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

# Path variables read at start-up: an empty or relative entry names the working directory (or a folder in it).
_PATH_LISTS = ("PYTHONPATH",)
_PATHS = ("PYTHONHOME", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX", "PYTHONSTARTUP")


def python(*args: str) -> list[str]:
    """The command line of a child Python running `args` (e.g. "-m", "module") without the working directory
    on its path."""
    return [sys.executable, "-P", *args]


def _scrub(env: MutableMapping[str, str]) -> None:
    env["PYTHONSAFEPATH"] = "1"
    for name in _PATH_LISTS:
        if name in env:
            kept = [entry for entry in env[name].split(os.pathsep) if os.path.isabs(entry)]
            if kept:
                env[name] = os.pathsep.join(kept)
            else:
                del env[name]
    for name in _PATHS:
        if name in env and not os.path.isabs(env[name]):
            del env[name]


def environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) as a child Python's: safe path, no relative path entries."""
    env = dict(os.environ if base is None else base)
    _scrub(env)
    return env


def isolate() -> None:
    """This process's own environment made so, for every Python started from it by code preemptlens does not
    write (multiprocessing, the JVM); the command line calls it first, as it sets the umask."""
    _scrub(os.environ)
