"""Prometheus query_range answers against hostile labels, times and values: an answer is read
(bad points and series quarantined) or refused as a whole with a SourceError, never a crash;
the page's gpu_samples rows build and pass the contract checks."""

from __future__ import annotations

import json
from collections.abc import Iterator

import polars as pl
import pytest
from hostile_values import HOSTILE, NASTY_TEXT, numbers, text
from hypothesis import given
from hypothesis import strategies as st

from preemptlens.collectors.prometheus import STREAMS, PageParser, page_frame, range_result
from preemptlens.errors import SourceError
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.hostile

LABELS = {"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Hostname": "gpu01", "UUID": "GPU-1", "gpu": "0",
          "GPU_I_ID": "", "hpc_job": "100", "instance": "gpu01:9400", "pod": "p", "namespace": "ml"}
T0 = 1_793_606_400


@pytest.fixture(scope="module")
def warehouse() -> Iterator[Warehouse]:
    with Warehouse(":memory:") as wh:
        yield wh


@st.composite
def series(draw: st.DrawFn, index: int) -> dict[str, object]:
    labels = dict(LABELS, UUID=f"GPU-{index}")
    for name in draw(st.lists(st.sampled_from(sorted(LABELS)), max_size=3, unique=True)):
        if draw(st.booleans()):
            labels[name] = draw(text)
        else:
            del labels[name]
    points: list[list[object]] = []
    for step in range(draw(st.integers(0, 5))):
        t: object = T0 + 60 * step
        value: object = "0.5"
        if draw(st.integers(0, 3)) == 0:
            t = draw(st.one_of(numbers, st.sampled_from(NASTY_TEXT)))
        if draw(st.integers(0, 3)) == 0:
            value = draw(st.one_of(st.sampled_from(["NaN", "+Inf", "-Inf", "1e400", "", "x", "0x1"]), text, numbers))
        points.append([t, value])
    return {"metric": labels, "values": points}


@HOSTILE
@given(data=st.data())
def test_query_range_answers(warehouse: Warehouse, data: st.DataObject) -> None:
    result = [data.draw(series(i)) for i in range(data.draw(st.integers(0, 3)))]
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    compact = data.draw(st.booleans())  # Prometheus' own compact JSON, or any other layout
    body = json.dumps(answer, separators=(",", ":") if compact else (", ", ": "), allow_nan=True)
    try:
        read = range_result(body.encode("utf-8", "surrogatepass"))
    except SourceError as exc:
        assert "\n" not in exc.message
        return
    parser = PageParser("[hostile page]")
    frames = {stream: parser.points(read, stream) for stream in STREAMS}
    weights = pl.DataFrame(schema={"sid": pl.Int32, "t": pl.Int64, "weight": pl.Float64})
    frame = page_frame("c1", parser, frames, weights, 60_000, "max")
    assert frame.height <= sum(len(s["values"]) for s in result)  # type: ignore[arg-type]
    if data.draw(st.integers(0, 19)) == 0:
        good, bad = warehouse._validate("gpu_samples", frame, "prometheus")
        assert good.height + len(bad) == frame.height
