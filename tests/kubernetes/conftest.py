"""The fake API server (k8s_fake) as a fixture, one per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from k8s_fake import FakeApiServer


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    try:
        yield server
    finally:
        server.stop()
