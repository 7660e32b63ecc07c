"""Reading the answers of query_range without a Python object per point."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from preemptlens.errors import SourceError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class RangeAnswer:
    """A query_range answer: each series' labels and point count, all points in one frame."""

    metrics: list[dict[str, str]]
    counts: np.ndarray  # points per series, in the order of `metrics`
    samples: pl.DataFrame  # t (epoch ms), value; series after series
    warnings: list[str]


# GPU and time in one integer, so that the per-row joins and groupings are on one column:
# epoch milliseconds fit in 42 bits until the year 2109.
_T_BITS = 1 << 42

_VALUES = re.compile(rb'"values"\s*:\s*\[')
_SAMPLE_SCHEMA = {"t": pl.Float64, "value": pl.Float64}


def _split_values(body: bytes) -> tuple[Any, np.ndarray, pl.DataFrame]:
    """The answer without its points, the points per series, and all points in one frame."""
    import numpy as np

    skeleton_parts, segments = [], []
    at = 0
    for match in _VALUES.finditer(body):
        begin = match.end()
        # Values are numbers and quoted numbers, so the first `]]` closes the array.
        end = begin if body[begin : begin + 1] == b"]" else body.index(b"]]", begin) + 1
        skeleton_parts.append(body[at:begin])
        segments.append(body[begin:end])
        at = end
    skeleton_parts.append(body[at:])
    answer = orjson.loads(b"".join(skeleton_parts))
    counts = np.fromiter((seg.count(b"[") for seg in segments), dtype=np.int64, count=len(segments))
    text = b"\n".join(seg for seg in segments if seg).replace(b"],[", b"\n").translate(None, b'"[]')
    samples = (
        pl.read_csv(text, has_header=False, new_columns=["t", "value"], schema=_SAMPLE_SCHEMA)
        if text
        else pl.DataFrame(schema=_SAMPLE_SCHEMA)
    )
    if len(answer["data"]["result"]) != len(segments) or samples.height != int(counts.sum()):
        raise ValueError("the values arrays were not cut where the series are")
    return answer, counts, samples


def range_result(body: bytes) -> RangeAnswer:
    """`read_range_result`, with an answer that is not a query_range result in Prometheus' shape
    made a SourceError naming what is wrong (the exception's class: the body may be huge)."""
    try:
        return read_range_result(body)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError,
            pl.exceptions.PolarsError) as exc:
        raise SourceError(
            f"prometheus: a query_range answer cannot be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:120] if str(exc) else 'malformed'})",
            "check that prometheus.url points at the Prometheus HTTP API (or a server that speaks it)",
        ) from None


def read_range_result(body: bytes) -> RangeAnswer:
    """Read a query_range answer without a Python object per point.

    The `values` arrays (`[[1733000000,"0.25"],...]`, the bulk of the body) are
    cut out and read as one CSV by polars; the rest, the labels, is small and
    read by orjson. A string in JSON cannot hold `"values":[` unescaped, so the
    cut is exact for the compact JSON that Prometheus and its kin write; a
    body formatted otherwise (spaces, line breaks) is read whole by orjson.

    Prometheus, Thanos (partial responses), Mimir and Cortex put warnings in
    `warnings`; VictoriaMetrics' cluster flags a partial answer `isPartial`.
    """
    import numpy as np

    try:
        answer, counts, samples = _split_values(body)
    except (ValueError, pl.exceptions.PolarsError):
        answer = orjson.loads(body)
        series = answer["data"]["result"]
        counts = np.array([len(one["values"]) for one in series], dtype=np.int64)
        points = [point for one in series for point in one["values"]]
        samples = pl.DataFrame(
            {"t": [float(p[0]) for p in points], "value": [float(p[1]) for p in points]}, schema=_SAMPLE_SCHEMA
        )
    warnings = [str(w) for w in answer.get("warnings") or ()]
    if answer.get("isPartial"):
        warnings.append("isPartial: some storage nodes did not answer")
    return RangeAnswer(
        metrics=[one["metric"] for one in answer["data"]["result"]],
        counts=counts,
        # A time outside what the GPU-and-time key holds (1970 to 2109, see _T_BITS) is NULL here
        # and quarantined by PageParser.points; casting it would overflow and lose the page.
        samples=samples.select(
            pl.when(pl.col("t").is_between(0, (_T_BITS - 1) / 1000))
            .then((pl.col("t") * 1000).round())
            .cast(pl.Int64)
            .alias("t"),
            "value",
        ),
        warnings=warnings,
    )
