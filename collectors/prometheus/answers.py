"""Reading the answers of the Prometheus HTTP API: query_range without a Python object per point, the series
lookup, and the detail of an error.

An answer that cannot be read at all (not JSON, not a success, not the shape of its endpoint) is an
AnswerError whose message says what is wrong in one line. A series or point that cannot be read is a
`Problem` (the page quarantines it) and the rest of the answer is read.

Memory: the `values` arrays, the bulk of an answer, are read in batches of at most `_BATCH` bytes into two
float columns (16 bytes a point, against about 20 of text), so reading an answer costs about its own size
again, whatever its size. Only a small answer (`_WHOLE_MAX`) is ever read whole into Python objects.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from preemptlens.collectors.prometheus.labels import series_key

if TYPE_CHECKING:
    import numpy as np

# GPU and time in one integer, so that the per-row joins and groupings are on one column:
# epoch milliseconds fit in 42 bits until the year 2109.
_T_BITS = 1 << 42
_T_MAX_S = (_T_BITS - 1) / 1000

# JSON's whitespace (`\s` also takes \v and \f, which JSON does not).
_VALUES = re.compile(rb'"values"[ \t\r\n]*:[ \t\r\n]*\[')
_END = re.compile(rb"\][ \t\r\n]*\]")
_EMPTY = re.compile(rb"[ \t\r\n]*\]")
_BLANK = b" \t\r\n"
# A point `[1733000000,"0.25"]` becomes the CSV line `1733000000,"0.25",,`: one pass of bytes.translate, and
# polars reads the quoted number (and ignores the two empty fields). A point with another number of members,
# or a value that holds a comma or bracket, changes the number of commas.
_TO_CSV = bytes.maketrans(b"[]", b"\n,")
_CSV_SCHEMA = {"t": pl.Float64, "value": pl.Float64}
_SAMPLE_SCHEMA = {"t": pl.Int64, "value": pl.Float64}
# Values text converted at once: bounds the copies made on the way to the columns.
_BATCH = 32 << 20
# An answer (or one series' values) not laid out as the Prometheus API writes it is read whole into Python
# objects (about seven times its size) only up to this size; a larger one is an error (or a quarantined series).
_WHOLE_MAX = 8 << 20
_EXCERPT = 200
# The other kinds of answer the query API has (https://prometheus.io/docs/prometheus/latest/querying/api/).
_RESULT_TYPES = ("vector", "scalar", "string")
_STR = {str}


class AnswerError(ValueError):
    """An answer that cannot be read at all; the message says what is wrong, in one line."""


@dataclass(frozen=True)
class Problem:
    """A series or some of its points that cannot be read, left out of the answer's rows."""

    record: str
    field: str
    reason: str
    raw: str | None = None


@dataclass(frozen=True)
class RangeAnswer:
    """A query_range answer: each readable series' labels and point count, all their readable points in one
    frame, the server's warnings and what could not be read."""

    metrics: list[dict[str, str]]
    counts: np.ndarray  # points per series, in the order of `metrics`
    samples: pl.DataFrame  # t (epoch ms, 1970 to 2109), value; series after series
    warnings: list[str]
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class SeriesAnswer:
    """A series lookup: the label sets listed (entries that are not label sets counted in `unreadable`)."""

    labels: list[dict[str, str]]
    unreadable: int
    warnings: list[str]


def excerpt(value: Any) -> str:
    """At most `_EXCERPT` characters of a value from an answer, on one line."""
    if isinstance(value, dict | list):
        try:
            text = orjson.dumps(value).decode()
        except orjson.JSONEncodeError:  # nested deeper than orjson writes
            text = repr(value)
    else:
        text = repr(value)
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."


def _loads(body: bytes | bytearray | memoryview, what: str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise AnswerError(f"{what} is not JSON ({str(exc).splitlines()[0][:120]})") from None


def _success(answer: Any, what: str) -> Any:
    """The `data` of a successful answer."""
    if not isinstance(answer, dict):
        raise AnswerError(f"{what} is a JSON {type(answer).__name__}, not an object")
    status = answer.get("status")
    if status != "success":
        raise AnswerError(f"{what} has status {excerpt(status)}, not 'success'" if "status" in answer
                          else f"{what} has no status")
    if "data" not in answer:
        raise AnswerError(f"{what} has no data")
    return answer["data"]


def _warnings(answer: dict[str, Any]) -> list[str]:
    """Prometheus, Thanos (partial responses), Mimir and Cortex put warnings in `warnings`; VictoriaMetrics'
    cluster flags a partial answer `isPartial`. Warnings that cannot be read are a warning too: the answer
    may be partial."""
    given = answer.get("warnings")
    if isinstance(given, list):
        # On one line each: they are logged.
        warnings = [" ".join(w.split())[:500] if isinstance(w, str) else excerpt(w) for w in given]
    elif given is None:
        warnings = []
    else:
        warnings = [f"the answer's warnings are not a list: {excerpt(given)}"]
    if answer.get("isPartial"):
        warnings.append("isPartial: some storage nodes did not answer")
    return warnings


def _labels(metric: Any) -> dict[str, str] | None:
    # Types compared in C (map, set): this runs once per series of every answer.
    if isinstance(metric, dict) and set(map(type, metric.values())) <= _STR:
        return metric
    return None


# -- query_range -------------------------------------------------------------


def range_result(body: bytes | bytearray, what: str = "a query_range answer") -> RangeAnswer:
    """Read a query_range answer (`what` names it in errors) without a Python object per point.

    The `values` arrays (`[[1733000000,"0.25"],...]`) are cut out and read as CSV by polars; the rest, the
    labels, is small and read by orjson. A JSON string cannot hold `"values":[` with its quote unescaped,
    so the cut is exact for the JSON that Prometheus and its kin write; the cuts are checked against the
    series the rest names, and an answer cut wrongly (or a series' values that do not read as CSV) is read
    with orjson instead, within the size bounds above.
    """
    cuts = _cut(body)
    answer = None
    if cuts is not None:
        skeleton = bytearray()
        at = 0
        for begin, end in cuts:
            skeleton += memoryview(body)[at:begin]
            at = end
        skeleton += memoryview(body)[at:]
        try:
            answer = orjson.loads(skeleton)
        except orjson.JSONDecodeError:
            pass
        del skeleton
    if cuts is not None and answer is not None:
        result = _matrix(answer, what)
        plan = _plan(result, len(cuts))
        if plan is not None:
            return _read(body, answer, result, plan, cuts)
    # Not laid out as the Prometheus API writes it: read it whole, if it is small enough.
    if len(body) > _WHOLE_MAX:
        raise AnswerError(
            f"{what} is not laid out as the Prometheus API writes it, and at {len(body):,} bytes too large to "
            f"read otherwise (at most {_WHOLE_MAX:,})"
        )
    answer = _loads(body, what)
    result = _matrix(answer, what)
    return _read_objects(answer, result)


def _cut(body: bytes | bytearray) -> list[tuple[int, int]] | None:
    """Where each `values` array's points begin and end: `[begin, end)` holds `[t,"v"],[t,"v"]`; None when
    one would begin inside another (the answer is not laid out as the API writes it)."""
    cuts: list[tuple[int, int]] = []
    for match in _VALUES.finditer(body):
        begin = match.end()
        if cuts and match.start() < cuts[-1][1]:
            return None
        if begin >= len(body):
            break  # cut off after `"values":[`: orjson says where
        empty = _EMPTY.match(body, begin)
        if empty:
            cuts.append((begin, begin))
            continue
        if body[begin] in _BLANK:
            found = _END.search(body, begin)
            end = found.start() + 1 if found else -1
        else:
            # Values are numbers and quoted numbers, so the first `]]` closes the array (a value that holds
            # one is cut wrongly, which the checks find).
            end = body.find(b"]]", begin) + 1
        if end <= 0:
            break  # the rest is not JSON: orjson says where
        cuts.append((begin, end))
    return cuts


def _matrix(answer: Any, what: str) -> list[Any]:
    data = _success(answer, what)
    if not isinstance(data, dict):
        raise AnswerError(f"{what} has data {excerpt(data)}, not an object")
    kind = data.get("resultType")
    if kind != "matrix":
        said = f"a {kind}" if kind in _RESULT_TYPES else f"resultType {excerpt(kind)}" if "resultType" in data \
            else "no resultType"
        raise AnswerError(f"{what} holds {said} where a query_range answer holds a matrix")
    result = data.get("result")
    if not isinstance(result, list):
        raise AnswerError(f"{what} has result {excerpt(result)}, not a list")
    return result


# A series' part in the answer: its labels (None: cannot be read), the cut that holds its values (None: none),
# and why it cannot be read.
_Planned = tuple[dict[str, str] | None, int | None, Problem | None]


def _plan(result: list[Any], cuts: int) -> list[_Planned] | None:
    """Each series with the cut holding its values, or None when the cuts are not where the series are."""
    plan: list[_Planned] = []
    taken = 0
    for number, one in enumerate(result):
        record = f"series #{number + 1}"
        if not isinstance(one, dict):
            plan.append((None, None, Problem(record, "series", "is not an object", excerpt(one))))
            continue
        labels = _labels(one.get("metric"))
        values = one.get("values")
        cut = None
        if values == []:  # the cut left the array empty
            cut, taken = taken, taken + 1
        elif isinstance(values, list):
            return None  # a values array the cuts missed
        if labels is None:
            why = "has no metric" if "metric" not in one else "is not an object of label names to strings"
            plan.append((None, cut, Problem(record, "metric", why, excerpt(one.get("metric")))))
        elif "values" not in one:
            plan.append((None, None, Problem(f"series {series_key(labels)}", "values", "is missing")))
        elif cut is None:
            plan.append((None, None, Problem(f"series {series_key(labels)}", "values", "is not a list",
                                             excerpt(values))))
        else:
            plan.append((labels, cut, None))
    return plan if taken == cuts else None


def _read(
    body: bytes | bytearray, answer: dict[str, Any], result: list[Any], plan: list[_Planned],
    cuts: list[tuple[int, int]],
) -> RangeAnswer:
    import numpy as np

    problems = [p for _, _, p in plan if p is not None]
    read = [(labels, cut) for labels, cut, _ in plan if labels is not None and cut is not None]
    counts = np.array([body.count(b"[", *cuts[cut]) for _, cut in read], dtype=np.int64)
    view = memoryview(body)
    frames: list[pl.DataFrame] = []
    # Series in batches of at most _BATCH bytes of values (a series is never split).
    first = 0
    while first < len(read):
        last, size = first, 0
        while last < len(read) and (last == first or size + _span(cuts[read[last][1]]) <= _BATCH):
            size += _span(cuts[read[last][1]])
            last += 1
        batch = read[first:last]
        frame = _csv([view[slice(*cuts[cut])] for _, cut in batch if _span(cuts[cut])], int(counts[first:last].sum()))
        if frame is None:
            # Something in these series is not a plain point: read them one by one.
            parts = []
            for i, (labels, cut) in enumerate(batch, first):
                points, problem = _series_values(view[slice(*cuts[cut])], labels)
                counts[i] = points.height
                parts.append(points)
                if problem is not None:
                    problems.append(problem)
            frame = pl.concat(parts) if parts else pl.DataFrame(schema=_SAMPLE_SCHEMA)
        frames.append(frame)
        first = last
    # Kept in chunks: one contiguous copy would hold every point twice at the peak.
    samples = pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema=_SAMPLE_SCHEMA)
    metrics = [labels for labels, _ in read]
    samples, counts = _timed(metrics, counts, samples, problems)
    return RangeAnswer(metrics, counts, samples, _warnings(answer), problems)


def _span(cut: tuple[int, int]) -> int:
    return cut[1] - cut[0]


def _csv(segments: Sequence[memoryview], points: int) -> pl.DataFrame | None:
    """The points of these values arrays (t in seconds, value), or None when they are not all plain
    `[number,"number"]` points, as many as `points`."""
    if not segments:
        return pl.DataFrame(schema=_SAMPLE_SCHEMA) if points == 0 else None
    # Each array's points end in `]`, which becomes the comma that ends the last CSV line of the array: three
    # commas a plain point.
    text = b",".join([*segments, b""]).translate(_TO_CSV)
    if text.count(b",") != 3 * points:
        return None
    try:
        # The text starts with the first point's `\n`: an empty first line.
        frame = pl.read_csv(text, has_header=False, schema=_CSV_SCHEMA, skip_lines=1, quote_char='"',
                            extra_columns="ignore")
    except (pl.exceptions.PolarsError, ValueError):
        return None
    if frame.height != points or frame.null_count().row(0) != (0, 0):
        return None
    return frame.select(_millis(pl.col("t")), "value")


def _millis(seconds: pl.Expr) -> pl.Expr:
    """Epoch seconds as milliseconds; NULL outside what the GPU-and-time key holds (1970 to 2109, see _T_BITS)."""
    return pl.when(seconds.is_between(0, _T_MAX_S)).then((seconds * 1000).round()).cast(pl.Int64).alias("t")


def _series_values(segment: memoryview, labels: dict[str, str]) -> tuple[pl.DataFrame, Problem | None]:
    """One series' points read with orjson, those that cannot be read left out and said."""
    record = f"series {series_key(labels)}"
    if len(segment) > _WHOLE_MAX:
        return pl.DataFrame(schema=_SAMPLE_SCHEMA), Problem(
            record, "values", f"are {len(segment):,} bytes not laid out as the Prometheus API writes them"
        )
    try:
        values = orjson.loads(b"[" + segment + b"]")
    except orjson.JSONDecodeError as exc:
        return pl.DataFrame(schema=_SAMPLE_SCHEMA), Problem(
            record, "values", f"are not JSON ({str(exc).splitlines()[0][:120]})", excerpt(bytes(segment[:_EXCERPT]))
        )
    return _points(values, record)


def _points(values: list[Any], record: str) -> tuple[pl.DataFrame, Problem | None]:
    """Points read as the CSV path reads them (polars' number parsing); those that are not a pair of a
    number and a number or numeric string are left out and said."""
    times: list[str | None] = []
    numbers: list[str | None] = []
    shapeless: list[Any] = []
    typeless: list[Any] = []  # values that are neither a number nor a string
    for point in values:
        if isinstance(point, list) and len(point) == 2:
            times.append(_number_text(point[0]))
            numbers.append(_number_text(point[1]))
            if numbers[-1] is None and not typeless:
                typeless.append(point[1])
        else:
            shapeless.append(point)
    frame = pl.DataFrame({"t": times, "value": numbers}, schema={"t": pl.String, "value": pl.String}).select(
        _millis(pl.col("t").cast(pl.Float64, strict=False)).alias("t_ms"),
        pl.col("t").alias("t_text"),
        pl.col("value").cast(pl.Float64, strict=False),
        pl.col("value").alias("value_text"),
    )
    unnumbered = frame.filter(pl.col("value").is_null())
    frame = frame.filter(pl.col("value").is_not_null())
    said = []
    if shapeless:
        said.append(f"{len(shapeless)} point(s) that are not a pair of a time and a value "
                    f"(such as {excerpt(shapeless[0])})")
    if unnumbered.height:
        first = typeless[0] if typeless else unnumbered["value_text"][0]
        said.append(f"{unnumbered.height} point(s) whose value is not a number (such as {excerpt(first)})")
    problem = Problem(record, "value" if not shapeless else "values", "; ".join(said)) if said else None
    # An unreadable time is kept as NULL and said with the others (see _timed).
    return frame.select(pl.col("t_ms").alias("t"), "value"), problem


def _number_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _timed(
    metrics: list[dict[str, str]], counts: np.ndarray, samples: pl.DataFrame, problems: list[Problem]
) -> tuple[pl.DataFrame, np.ndarray]:
    """Leave out the points whose time is not epoch seconds from 1970 to 2109 (NULL here), said once per
    series: casting them into the GPU-and-time key would overflow and lose the page."""
    import numpy as np

    untimed = samples["t"].is_null()
    if not untimed.any():
        return samples, counts
    series = np.repeat(np.arange(len(counts)), counts)
    lost = np.bincount(series[untimed.to_numpy()], minlength=len(counts))
    # One problem per series: the quarantine keeps one reason per record.
    said = {p.record: i for i, p in enumerate(problems)}
    for one in np.flatnonzero(lost):
        record = f"series {series_key(metrics[one])}"
        reason = f"{lost[one]} point(s) with a time that is not epoch seconds from 1970 to 2109"
        if record in said:
            before = problems[said[record]]
            problems[said[record]] = Problem(record, before.field, f"{before.reason}; {reason}", before.raw)
        else:
            problems.append(Problem(record, "time", reason))
    return samples.filter(~untimed), counts - lost


def _read_objects(answer: dict[str, Any], result: list[Any]) -> RangeAnswer:
    """An answer read whole by orjson (small: see range_result), series by series."""
    import numpy as np

    problems: list[Problem] = []
    metrics: list[dict[str, str]] = []
    parts: list[pl.DataFrame] = []
    for number, one in enumerate(result):
        record = f"series #{number + 1}"
        if not isinstance(one, dict):
            problems.append(Problem(record, "series", "is not an object", excerpt(one)))
            continue
        labels = _labels(one.get("metric"))
        if labels is None:
            why = "has no metric" if "metric" not in one else "is not an object of label names to strings"
            problems.append(Problem(record, "metric", why, excerpt(one.get("metric"))))
            continue
        values = one.get("values")
        if not isinstance(values, list):
            problems.append(Problem(f"series {series_key(labels)}", "values",
                                    "is missing" if "values" not in one else "is not a list", excerpt(values)))
            continue
        points, problem = _points(values, f"series {series_key(labels)}")
        if problem is not None:
            problems.append(problem)
        metrics.append(labels)
        parts.append(points)
    counts = np.array([p.height for p in parts], dtype=np.int64)
    samples = pl.concat(parts) if parts else pl.DataFrame(schema=_SAMPLE_SCHEMA)
    samples, counts = _timed(metrics, counts, samples, problems)
    return RangeAnswer(metrics, counts, samples, _warnings(answer), problems)


# -- the series lookup and errors --------------------------------------------


def series_result(body: bytes | bytearray, what: str = "a series lookup") -> SeriesAnswer:
    """Read a /api/v1/series answer: a list of label sets."""
    answer = _loads(body, what)
    data = _success(answer, what)
    if not isinstance(data, list):
        raise AnswerError(f"{what} has data {excerpt(data)}, not a list of series")
    labels = [one for one in (_labels(entry) for entry in data) if one is not None]
    return SeriesAnswer(labels, len(data) - len(labels), _warnings(answer))


def error_detail(body: bytes | bytearray) -> str | None:
    """`errorType: error` of an error answer, or None when it says none."""
    try:
        detail = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(detail, dict) or not ({"errorType", "error"} & detail.keys()):
        return None
    kind, error = detail.get("errorType", ""), detail.get("error", "")
    return " ".join(f"{kind if isinstance(kind, str) else excerpt(kind)}: "
                    f"{error if isinstance(error, str) else excerpt(error)}".split())[:300]
