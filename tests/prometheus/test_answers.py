"""Reading query_range answers without a Python object per point, and writing history in chunks."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import orjson
import polars as pl
import pytest

from preemptlens.collectors.prometheus import AnswerError, range_result
from preemptlens.collectors.prometheus import answers as reading
from tests.prometheus.groundtruth import STYLES, raw_samples
from tests.prometheus.openmetrics import write_openmetrics, write_openmetrics_chunks

SERIES: list[dict[str, Any]] = [
    {
        "metric": {"Hostname": "n1", "UUID": "GPU-1", "hpc_job": "12_3"},
        "values": [[1796158860, "0.25"], [1796158920, "NaN"], [1796158980, "+Inf"]],
    },
    # A label value holding what the reader cuts on, escaped as JSON escapes it.
    {"metric": {"Hostname": "n2", "UUID": 'GPU-"values":[[1,"2"]]'}, "values": [[1796158860.5, "-1e-05"]]},
    {"metric": {"Hostname": "n3", "UUID": "GPU-3"}, "values": []},
    {"metric": {}, "values": [[1796158860, "-Inf"], [1796158861.25, "42"]]},
]


def answer(warnings: list[str] | None = None, partial: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "matrix", "result": SERIES}}
    if warnings is not None:
        body["warnings"] = warnings
    if partial:
        body["isPartial"] = True
    return body


@pytest.mark.parametrize("indent", [False, True], ids=["compact", "pretty"])
def test_answer_reads_as_orjson_reads_it(indent: bool) -> None:
    body = orjson.dumps(answer(["store b did not answer"], partial=True), option=orjson.OPT_INDENT_2 if indent else 0)
    got = range_result(body)
    assert got.metrics == [s["metric"] for s in SERIES]
    assert got.counts.tolist() == [len(s["values"]) for s in SERIES]
    want = pl.DataFrame(
        {
            "t": [round(float(t) * 1000) for s in SERIES for t, _ in s["values"]],
            "value": [float(v) for s in SERIES for _, v in s["values"]],
        },
        schema={"t": pl.Int64, "value": pl.Float64},
    )
    assert got.samples.equals(want)
    assert got.warnings == ["store b did not answer", "isPartial: some storage nodes did not answer"]


def test_answer_without_series_or_warnings() -> None:
    got = range_result(b'{"status":"success","data":{"resultType":"matrix","result":[]}}')
    assert got.metrics == [] and got.counts.tolist() == [] and got.samples.height == 0 and got.warnings == []


def test_an_answer_read_in_batches_is_the_answer_read_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    many = [{"metric": {"Hostname": f"n{i}", "UUID": f"GPU-{i}"},
             "values": [[1796158860 + 60 * j, f"{i}.{j}"] for j in range(i % 4)]} for i in range(40)]
    body = orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": many}})
    whole = range_result(body)
    monkeypatch.setattr(reading, "_BATCH", 64)  # a few series a batch
    batched = range_result(body)
    assert batched.samples.equals(whole.samples) and batched.counts.tolist() == whole.counts.tolist()
    assert whole.counts.tolist() == [i % 4 for i in range(40)] and whole.problems == []


def test_a_series_that_is_not_plain_points_is_read_alone_and_the_rest_as_csv() -> None:
    series = [*SERIES[:2], {"metric": {"UUID": "odd"}, "values": [[1796158860, "1", "extra"], [1796158920, "2"]]}]
    got = range_result(orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}}))
    assert got.counts.tolist() == [3, 1, 1]
    assert got.samples["value"].to_list()[-1] == 2.0
    assert [(p.record, p.field) for p in got.problems] == [('series {"UUID":"odd"}', "values")]


def test_an_answer_laid_out_otherwise_is_read_whole_only_when_small(monkeypatch: pytest.MonkeyPatch) -> None:
    # A key ending in `"values` cuts the answer where no series is: it is read whole, or refused when large.
    body = orjson.dumps({**answer(), "x\"values": [[1, "2"]]})
    assert range_result(body).counts.tolist() == [len(s["values"]) for s in SERIES]
    monkeypatch.setattr(reading, "_WHOLE_MAX", 100)
    with pytest.raises(AnswerError, match=r"^the busy query 'q' is not laid out as the Prometheus API writes it"):
        range_result(body, "the busy query 'q'")


def test_history_in_chunks_is_the_text_written_at_once() -> None:
    raw = raw_samples(datetime(2026, 11, 2, 12, tzinfo=UTC), 1)
    whole, same, chunked = io.StringIO(), io.StringIO(), io.StringIO()
    written = write_openmetrics(raw, whole, STYLES)
    assert write_openmetrics_chunks(lambda: (raw,), same, STYLES) == written
    assert same.getvalue() == whole.getvalue()
    hosts = sorted(set(raw["host"]))
    parts = [raw.filter(pl.col("host").is_in(hosts[:3])), raw.filter(~pl.col("host").is_in(hosts[:3]))]
    assert write_openmetrics_chunks(lambda: iter(parts), chunked, STYLES) == written
    lines = chunked.getvalue().splitlines()
    assert sorted(lines) == sorted(whole.getvalue().splitlines())
    # Each family's header comes once and its samples follow it without another family between.
    families = [line.split("{", 1)[0] for line in lines if not line.startswith("#")]
    runs = [name for i, name in enumerate(families) if i == 0 or families[i - 1] != name]
    assert len(runs) == len(set(runs)) == 4 and lines[-1] == "# EOF"
