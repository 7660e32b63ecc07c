"""The gpu_samples rows of one page, from the points of its answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import polars as pl

from preemptlens.collectors.prometheus.answers import _T_BITS, RangeAnswer
from preemptlens.collectors.prometheus.labels import normalise, series_key
from preemptlens.contract import Reject

if TYPE_CHECKING:
    import numpy as np

TABLE = "gpu_samples"
# Watermark streams, one per contract column a metric fills.
STREAMS = ("busy", "mem_used_mib", "power_w")
_T_SHIFT = _T_BITS.bit_length() - 1


class PageParser:
    """Turns the query results of one page into compact frames.

    Series (by their full label set) and GPUs (host, UUID, MIG instance) get
    small integer ids, so joins and groupings over hundreds of thousands of
    points run on integers; the strings are attached once per GPU at the end.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.series: dict[str, int] = {}
        self.labels: list[dict[str, str]] = []  # by sid
        self.series_rows: list[tuple[int, int, int | None, str | None]] = []  # sid, gid, gpu index, job
        self.gpus: dict[tuple[str, str, str], int] = {}
        self.rejects: dict[str, Reject] = {}
        # (sid, t, duplicated) of the streams asked so far: the streams of a page usually answer the same
        # series at the same steps, and are then counted once.
        self._duplicates: list[tuple[pl.Series, pl.Series, pl.Series]] = []

    def _sid(self, labels: dict[str, str], stream: str) -> int | None:
        key = series_key(labels)
        sid = self.series.get(key)
        if sid is not None:
            return sid
        gpu = normalise(labels)
        if isinstance(gpu, tuple):
            # A series that cannot be normalised is quarantined once, not once per metric.
            reason = f"{gpu[1]} ({stream} query, {self.where})"
            self.rejects.setdefault(key, Reject(TABLE, f"series {key}", gpu[0], reason, key))
            return None
        gid = self.gpus.setdefault((gpu.host, gpu.gpu_uuid, gpu.gpu_instance), len(self.gpus))
        sid = self.series[key] = len(self.series)
        self.labels.append(labels)
        self.series_rows.append((sid, gid, gpu.gpu_index, gpu.job_id))
        return sid

    def points(self, answer: RangeAnswer, stream: str) -> pl.DataFrame:
        """One row per (series, step) of a query_range answer: sid, t (epoch ms), value. What the answer
        could not read is quarantined, once per page, record and field."""
        import numpy as np

        for problem in answer.problems:
            # Named by the answer it is in: a series' points may be unreadable in one answer and not another.
            record = f"{problem.record} in the {stream} answer over {self.where}"
            self.rejects.setdefault(record, Reject(
                TABLE, record, problem.field, f"{problem.reason} ({stream} query, {self.where})", problem.raw))
        sids = [self._sid(labels, stream) for labels in answer.metrics]
        sid = np.repeat(np.array([-1 if s is None else s for s in sids], dtype=np.int32), answer.counts)
        frame = answer.samples.with_columns(pl.Series("sid", sid, dtype=pl.Int32))
        if any(s is None for s in sids):
            frame = frame.filter(pl.col("sid") >= 0)
        return frame.select("sid", "t", "value")

    def duplicated(self, frame: pl.DataFrame, step_ms: int) -> pl.Series:
        """Which of a stream's points (sid, t) share a GPU and step with another of its points."""
        import numpy as np

        sid, t = frame["sid"], frame["t"]
        for seen_sid, seen_t, dup in self._duplicates:
            if seen_sid.equals(sid) and seen_t.equals(t):
                return dup
        gid = np.fromiter((row[1] for row in self.series_rows), dtype=np.int64, count=len(self.series_rows))
        dup = pl.Series(_duplicated(gid[sid.to_numpy()], t.to_numpy(), step_ms))
        self._duplicates.append((sid, t, dup))
        return dup

    def series_frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            self.series_rows,
            schema={"sid": pl.Int32, "gid": pl.Int32, "gpu_index": pl.Int32, "job_id": pl.String},
            orient="row",
        )

    def gpu_frame(self) -> pl.DataFrame:
        rows = [(gid, *ident) for ident, gid in self.gpus.items()]
        schema = {"gid": pl.Int32, "host": pl.String, "gpu_uuid": pl.String, "gpu_instance": pl.String}
        return pl.DataFrame(rows, schema=schema, orient="row")


def resolve(
    frame: pl.DataFrame, series: pl.DataFrame, weights: pl.DataFrame, step_ms: int, how: str
) -> pl.DataFrame:
    """One value and job per GPU and step where several series describe the same GPU.

    That happens at a job boundary (the old job's series and the new one's
    both have samples in the step) and with shared GPUs (one series per job).
    Values combine as the step's true aggregate (`weight` = raw samples per
    series and step). The job is the one that holds the GPU at the step's end:
    the series that goes on in the next step and did not exist in the previous
    one ranks first; jobs that tie are all named, sorted, comma-separated.

    `series` is indexed by sid (row i describes sid i), so its columns are
    gathered rather than joined. Returns key (GPU and time), gpu_index, job_id, value.
    """
    sid = frame["sid"]
    frame = frame.with_columns(
        (series["gid"].gather(sid).cast(pl.Int64) * _T_BITS + pl.col("t")).alias("key"),
        series["gpu_index"].gather(sid).alias("gpu_index"),
        series["job_id"].gather(sid).alias("job_id"),
    )
    cols = ["key", "gpu_index", "job_id", "value"]
    dup = duplicated(frame["key"], step_ms)
    if not dup.any():
        return frame.select(cols)
    many = frame.filter(dup)
    # Presence in the neighbouring steps is read from the whole page, not just the duplicated rows.
    present = frame.filter(pl.col("sid").is_in(many["sid"].unique().implode())).select("sid", "t")
    nxt = present.with_columns(pl.col("t") - step_ms, pl.lit(1, pl.Int8).alias("_next"))
    prv = present.with_columns(pl.col("t") + step_ms, pl.lit(1, pl.Int8).alias("_prev"))
    ranked = (
        many.join(weights, on=["sid", "t"], how="left")
        .with_columns(pl.col("weight").fill_null(1.0))
        .join(nxt, on=["sid", "t"], how="left")
        .join(prv, on=["sid", "t"], how="left")
        .with_columns((pl.col("_next").fill_null(0) * 2 + 1 - pl.col("_prev").fill_null(0)).alias("_rank"))
    )
    top = pl.col("_rank") == pl.col("_rank").max()
    value = (
        pl.col("value").max()
        if how == "max"
        else (pl.col("value") * pl.col("weight")).sum() / pl.col("weight").sum()
    )
    combined = ranked.group_by("key").agg(
        pl.col("gpu_index").drop_nulls().first(),
        pl.col("job_id").filter(top).drop_nulls().unique().sort().str.join(",").alias("job_id"),
        value.alias("value"),
    )
    combined = combined.with_columns(pl.col("job_id").replace("", None))
    return pl.concat([frame.filter(~dup).select(cols), combined.select(cols)])


def duplicated(key: pl.Series, step_ms: int) -> pl.Series:
    """`key.is_duplicated()` of GPU-and-time keys (see `_duplicated`)."""
    values = key.to_numpy()
    return pl.Series(_duplicated(values >> _T_SHIFT, values & (_T_BITS - 1), step_ms))


def _duplicated(gid: np.ndarray, t: np.ndarray, step_ms: int) -> np.ndarray:
    """Which (GPU, time) pairs occur more than once. Answers put their points on the page's step grid: then
    counting them in a dense grid of GPUs x steps says it in one pass (a time off the grid, or a grid far
    larger than the points, is left to the hash-based count)."""
    import numpy as np

    if len(t) < 2:
        return np.zeros(len(t), dtype=bool)
    t0 = int(t.min())
    slot = (t - t0) // step_ms
    steps = int(slot.max()) + 1
    cells = (int(gid.max()) + 1) * steps
    if cells > 8 * len(t) + 1_000_000 or (slot * step_ms + t0 != t).any():
        return pl.Series((gid.astype(np.int64) << _T_SHIFT) | t).is_duplicated().to_numpy()
    cell = gid * steps + slot
    return np.bincount(cell, minlength=cells)[cell] > 1


def _aligned(
    parser: PageParser, series: pl.DataFrame, results: Mapping[str, pl.DataFrame], step_ms: int
) -> pl.DataFrame | None:
    """The page's rows as `resolve` and the join in page_frame give them, without either, when every stream
    answered the same series at the same steps, in the same order, and no GPU has two series at one step
    (the usual page: the queries differ only in their metric); None otherwise."""
    frames = list(results.values())
    first = frames[0]
    if any(f.height != first.height for f in frames) or not all(
        f["sid"].equals(first["sid"]) and f["t"].equals(first["t"]) for f in frames[1:]
    ):
        return None
    if parser.duplicated(first, step_ms).any():
        return None
    sid = first["sid"]
    key = series["gid"].gather(sid).cast(pl.Int64) * _T_BITS + first["t"]
    stream = next(iter(results))
    return pl.DataFrame({
        "key": key,
        f"_index_{stream}": series["gpu_index"].gather(sid),
        f"_job_{stream}": series["job_id"].gather(sid),
        **{name: frame["value"] for name, frame in results.items()},
    })


def page_frame(
    cluster: str,
    parser: PageParser,
    results: Mapping[str, pl.DataFrame],
    weights: pl.DataFrame,
    step_ms: int,
    mem_aggregation: str,
) -> pl.DataFrame:
    """The gpu_samples rows of one page: the three metrics joined on the GPU and time."""
    import numpy as np

    series = parser.series_frame()
    merged = _aligned(parser, series, results, step_ms)
    if merged is None:
        for stream, frame in results.items():
            how = mem_aggregation if stream == "mem_used_mib" else "avg"
            one = resolve(frame, series, weights, step_ms, how).rename(
                {"value": stream, "job_id": f"_job_{stream}", "gpu_index": f"_index_{stream}"}
            )
            merged = one if merged is None else merged.join(one, on="key", how="full", coalesce=True)
    assert merged is not None
    # Rows in (host, GPU, instance, time) order, sorted on integers: GPUs are numbered by their names.
    gpus = parser.gpu_frame().sort("host", "gpu_uuid", "gpu_instance")
    rank = np.empty(gpus.height, dtype=np.int64)
    rank[gpus["gid"].to_numpy()] = np.arange(gpus.height)
    gid = (merged["key"] // _T_BITS).to_numpy()
    merged = merged.with_columns(
        (pl.Series(rank[gid]) * _T_BITS + pl.col("key") % _T_BITS).alias("key")
    ).sort("key")
    order = merged["key"] // _T_BITS
    return merged.select(
        pl.lit(cluster, pl.String).alias("cluster"),
        gpus["host"].gather(order).alias("host"),
        gpus["gpu_uuid"].gather(order).alias("gpu_uuid"),
        gpus["gpu_instance"].gather(order).alias("gpu_instance"),
        pl.coalesce([c for c in merged.columns if c.startswith("_index_")]).alias("gpu_index"),
        pl.from_epoch(pl.col("key") % _T_BITS, time_unit="ms")
        .dt.replace_time_zone("UTC")
        .dt.cast_time_unit("us")
        .alias("time"),
        *(pl.col(s) for s in STREAMS),
        pl.coalesce([c for c in merged.columns if c.startswith("_job_")]).alias("job_id"),
    )
