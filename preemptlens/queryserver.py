"""The fork server whose children run ad-hoc queries (preemptlens.readonly), kept apart so that a command can
start it before it imports anything heavy.

The server is a fresh interpreter that imports preemptlens.readonly once; every query's child is forked from
it. A command about to run one query (`preemptlens sql "..."`) starts it first: the server then loads while
the command loads its own modules, instead of after them.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import forkserver

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["preemptlens.readonly"])


def start() -> None:
    """Start the server now if it is not running (it is started anyway by the first query)."""
    forkserver.ensure_running()
