"""Prometheus answers against hostile labels, times, values and shapes, for every reader of an answer
(query_range, the series lookup, an error's detail): an answer is read (series and points that cannot be
read quarantined, naming the record and field) or refused as a whole with one line naming the query, never
a crash; the page's gpu_samples rows build and pass the contract checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import polars as pl
import pytest
from hostile_values import HOSTILE, NASTY_TEXT, any_json, mutated, numbers, text
from hypothesis import given
from hypothesis import strategies as st

from preemptlens.collectors.prometheus import (
    STREAMS,
    AnswerError,
    PageParser,
    page_frame,
    range_result,
    series_result,
)
from preemptlens.collectors.prometheus.answers import error_detail
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.hostile

LABELS = {"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Hostname": "gpu01", "UUID": "GPU-1", "gpu": "0",
          "GPU_I_ID": "", "hpc_job": "100", "instance": "gpu01:9400", "pod": "p", "namespace": "ml"}
T0 = 1_793_606_400
WHAT = "the busy query 'avg_over_time(x[59999ms])' over [2026-11-02T00:00:00Z, 2026-11-02T01:00:00Z]"
# The shapes of the Prometheus HTTP API (https://prometheus.io/docs/prometheus/latest/querying/api/): a
# query_range answer, a series lookup, an error.
RANGE = {"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": dict(LABELS, UUID=f"GPU-{i}"), "values": [[T0 + 60 * s, "0.5"] for s in range(3)]} for i in range(2)
]}, "warnings": ["store b did not answer"]}
SERIES = {"status": "success", "data": [dict(LABELS, UUID=f"GPU-{i}") for i in range(2)]}
ERROR = {"status": "error", "errorType": "bad_data", "error": "invalid parameter \"query\""}


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
            value = draw(st.one_of(st.sampled_from(["NaN", "+Inf", "-Inf", "1e400", "", "x", "0x1", "]]", "[1]"]),
                                   text, numbers))
        points.append([t, value])
    return {"metric": labels, "values": points}


def nested(depth: int, inner: object) -> object:
    for _ in range(depth):
        inner = [inner]
    return inner


@st.composite
def deep(draw: st.DrawFn, base: dict[str, Any]) -> object:
    """The answer with one member (or the whole) nested hundreds to thousands of levels deep."""
    depth = draw(st.sampled_from([254, 255, 300, 1024, 1025, 5000]))
    answer = json.loads(json.dumps(base))
    where = draw(st.sampled_from(["whole", "data", "result", "metric", "label", "values", "point", "warnings"]))
    if where == "whole" or "data" not in answer:  # an error answer has no data
        return nested(depth, answer)
    if where == "data":
        answer["data"] = nested(depth, answer["data"])
    elif where == "warnings":
        answer["warnings"] = nested(depth, "w")
    elif isinstance(answer["data"], list):  # a series lookup
        answer["data"][0] = nested(depth, answer["data"][0])
    elif where == "result":
        answer["data"]["result"] = nested(depth, answer["data"]["result"])
    elif where == "metric":
        answer["data"]["result"][0]["metric"] = nested(depth, {})
    elif where == "label":
        answer["data"]["result"][0]["metric"]["Hostname"] = nested(depth, "gpu01")
    elif where == "values":
        answer["data"]["result"][0]["values"] = nested(depth, [])
    else:
        answer["data"]["result"][0]["values"][0] = nested(depth, T0)
    return answer


def body_of(data: st.DataObject, answer: object) -> bytes:
    layout = data.draw(st.sampled_from(["compact", "spaced", "pretty"]))  # Prometheus' own, or any other
    kwargs: dict[str, Any] = {"separators": (",", ":")} if layout == "compact" else \
        {"indent": 2} if layout == "pretty" else {}
    try:
        return json.dumps(answer, allow_nan=True, **kwargs).encode("utf-8", "surrogatepass")
    except RecursionError:
        return b"[" * 5000 + b"]" * 5000


def hostile_body(data: st.DataObject, base: dict[str, Any]) -> bytes:
    kind = data.draw(st.integers(0, 9))
    if kind == 0:
        return data.draw(st.one_of(st.binary(max_size=64), st.sampled_from(
            [b"", b"got", b"null", b"5", b"[]", b'{"status":"success"}', b'{"data":5}', b'{"status":"error"}',
             b'{"status":"success","data":{"resultType":"vector","result":[]}}', b"\xff\xfe{}"])))
    if kind == 1:
        return body_of(data, data.draw(any_json))
    if kind == 2:
        return body_of(data, data.draw(deep(base)))
    return body_of(data, data.draw(mutated(base, most=6)))


def one_line(exc: AnswerError) -> None:
    message = str(exc)
    assert message and "\n" not in message and "\r" not in message and len(message) < 1000


def build_page(read: Any) -> pl.DataFrame:
    parser = PageParser("[hostile page]")
    frames = {stream: parser.points(read, stream) for stream in STREAMS}
    for reject in parser.rejects.values():
        # Each names the record and field, and the query and page it came from.
        assert reject.record and reject.field and "query, [hostile page])" in reject.reason
    weights = pl.DataFrame(schema={"sid": pl.Int32, "t": pl.Int64, "weight": pl.Float64})
    return page_frame("c1", parser, frames, weights, 60_000, "max")


@HOSTILE
@given(data=st.data())
def test_query_range_answers(warehouse: Warehouse, data: st.DataObject) -> None:
    result = [data.draw(series(i)) for i in range(data.draw(st.integers(0, 3)))]
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    try:
        read = range_result(body_of(data, answer), WHAT)
    except AnswerError as exc:
        one_line(exc)
        return
    frame = build_page(read)
    assert frame.height <= sum(len(s["values"]) for s in result)  # type: ignore[arg-type]
    if data.draw(st.integers(0, 19)) == 0:
        good, bad = warehouse._validate("gpu_samples", frame, "prometheus")
        assert good.height + len(bad) == frame.height


@HOSTILE
@given(data=st.data())
def test_query_range_answers_of_any_shape(data: st.DataObject) -> None:
    try:
        read = range_result(hostile_body(data, RANGE), WHAT)
    except AnswerError as exc:
        one_line(exc)
        assert str(exc).startswith(WHAT)  # it names the query
        return
    assert len(read.metrics) == len(read.counts) and int(read.counts.sum()) == read.samples.height
    assert read.samples["t"].null_count() == 0 and all(isinstance(w, str) and "\n" not in w for w in read.warnings)
    build_page(read)


@HOSTILE
@given(data=st.data())
def test_series_lookups_of_any_shape(data: st.DataObject) -> None:
    what = "the series lookup of DCGM_FI_DEV_GPU_UTIL{} over [2026-11-02T00:00:00Z, 2026-11-02T01:00:00Z]"
    try:
        listed = series_result(hostile_body(data, SERIES), what)
    except AnswerError as exc:
        one_line(exc)
        assert str(exc).startswith(what)
        return
    assert all(isinstance(v, str) for labels in listed.labels for v in labels.values())
    assert listed.unreadable >= 0 and all(isinstance(w, str) and "\n" not in w for w in listed.warnings)


@HOSTILE
@given(data=st.data())
def test_error_answers_of_any_shape(data: st.DataObject) -> None:
    detail = error_detail(hostile_body(data, ERROR))
    assert detail is None or ("\n" not in detail and len(detail) <= 300)
