"""Another local user's connections, for the listeners' tests: a forked process that becomes `nobody` and keeps
connections open on a loopback port, reopening each as soon as the server closes or refuses it."""

from __future__ import annotations

import os
import pwd
import select
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

NOBODY = pwd.getpwnam("nobody")


@contextmanager
def connections_of_another_user(port: int, count: int, send: bytes = b"", seconds: float = 600) -> Iterator[int]:
    """While the block runs (at most `seconds`), `nobody` holds `count` connections to 127.0.0.1:`port`, each
    having sent `send` (nothing: idle; part of a request: half-sent); yields that user's uid."""
    # After setuid the child cannot read this interpreter's library (root's): what connect needs is loaded here.
    import encodings.idna  # noqa: F401

    until = time.monotonic() + seconds
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
            held: list[socket.socket] = []
            while time.monotonic() < until:
                while len(held) < count:
                    connection = socket.socket()
                    try:
                        connection.connect(("127.0.0.1", port))
                        if send:
                            connection.send(send)
                    except OSError:
                        connection.close()
                        time.sleep(0.05)
                        break
                    held.append(connection)
                for closed in select.select(held, [], [], 0.1)[0]:
                    closed.close()
                    held.remove(closed)
        finally:
            os._exit(0)
    try:
        yield NOBODY.pw_uid
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
