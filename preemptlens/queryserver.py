"""The fork server whose children run ad-hoc queries (preemptlens.readonly), kept apart so that a command can
start it before it imports anything heavy.

The server is a fresh interpreter that imports preemptlens.readonly once; every query's child is forked from
it. A command about to run one query (`preemptlens sql "..."`) starts it first: the server then loads while
the command loads its own modules, instead of after them.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import forkserver

from preemptlens.children import isolate

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["preemptlens.readonly"])


def start() -> None:
    """Start the server now if it is not running (readonly starts it so before each query's child).

    The server (and multiprocessing's resource tracker) is a `python -c`, which would put the working
    directory first on its path: it inherits this process's environment made safe (preemptlens.children)."""
    isolate()
    forkserver.ensure_running()
