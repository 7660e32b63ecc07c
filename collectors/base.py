"""What every collector hands to the load API.

A collector never opens the warehouse. It reads its source and yields
`Batch`es: frames per raw table, the records it could not parse (`Reject`),
and the cursor that the batch completes (`Watermark`). The runner loads each
batch in one transaction, so data and cursor always land together.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import polars as pl


@dataclass(frozen=True)
class Reject:
    """A record the collector could not turn into a row.

    `record` locates it in the source (``file.jsonl:12``, ``JobId=123``,
    ``series {...} @ 2026-11-02T10:00Z``); `field` names the offending field.
    """

    table: str
    record: str
    field: str
    reason: str
    raw: str | None = None


@dataclass(frozen=True)
class Watermark:
    collector: str
    cluster: str
    stream: str
    cursor: str


@dataclass
class Batch:
    source: str
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    watermarks: list[Watermark] = field(default_factory=list)


class Collector(Protocol):
    """A source adapter. `tables` lists the raw tables it writes."""

    name: ClassVar[str]
    tables: ClassVar[tuple[str, ...]]

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        """Yield batches from the cursors last committed, keyed by (cluster, stream)."""
        ...
