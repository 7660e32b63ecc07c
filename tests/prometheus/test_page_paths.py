"""The page builder's short cuts give what the general path gives: duplicate GPU-steps counted on the
step grid equal polars' hash count, and a page whose streams answered the same series at the same steps
(no join, no resolve) equals the page built by resolving and joining each stream."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from preemptlens.collectors.prometheus import STREAMS, PageParser, duplicated, page_frame
from preemptlens.collectors.prometheus import frames as page_frames
from preemptlens.collectors.prometheus.answers import _T_BITS

STEP = 60_000
T0 = 1_796_000_000_000


@given(
    gids=st.lists(st.integers(0, 5), min_size=0, max_size=60),
    steps=st.lists(st.integers(0, 9), min_size=60, max_size=60),
    off_grid=st.booleans(),
)
def test_counting_on_the_step_grid_finds_what_hashing_finds(gids: list[int], steps: list[int], off_grid: bool) -> None:
    t = [T0 + s * STEP + (7 if off_grid and i == 0 else 0) for i, s in enumerate(steps[: len(gids)])]
    key = pl.Series([g * _T_BITS + x for g, x in zip(gids, t, strict=True)], dtype=pl.Int64)
    assert duplicated(key, STEP).to_list() == key.is_duplicated().to_list()


def _page(series: list[tuple[int, str | None]], points: Mapping[str, list[tuple[int, int, float]]]) -> tuple[
        PageParser, dict[str, pl.DataFrame]]:
    """A parser knowing `series` (GPU number, job) and each stream's points (series, step, value)."""
    parser = PageParser("test")
    for number, (gpu, job) in enumerate(series):
        labels = {"Hostname": f"node{gpu // 8}", "UUID": f"GPU-{gpu}", "gpu": str(gpu % 8), "series": str(number)}
        if job is not None:
            labels["hpc_job"] = job
        parser._sid(labels, "busy")
    frames = {
        stream: pl.DataFrame({"sid": [p[0] for p in rows], "t": [T0 + p[1] * STEP for p in rows],
                              "value": [p[2] for p in rows]}, schema={"sid": pl.Int32, "t": pl.Int64,
                                                                       "value": pl.Float64})
        for stream, rows in points.items()
    }
    return parser, frames


WEIGHTS = pl.DataFrame(schema={"sid": pl.Int32, "t": pl.Int64, "weight": pl.Float64})


@settings(max_examples=200, deadline=None)
@given(
    series=st.lists(st.tuples(st.integers(0, 11), st.sampled_from([None, "1", "2"])), min_size=1, max_size=6),
    cells=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7)), min_size=1, max_size=30, unique=True),
    same=st.booleans(),
    data=st.data(),
)
def test_a_page_of_aligned_streams_equals_the_general_path(
    series: list[tuple[int, str | None]], cells: list[tuple[int, int]], same: bool, data: st.DataObject,
) -> None:
    cells = sorted((sid % len(series), step) for sid, step in cells)
    cells = list(dict.fromkeys(cells))
    values = {s: [float(v) for v in data.draw(st.lists(st.integers(0, 100), min_size=len(cells),
                                                           max_size=len(cells)))] for s in STREAMS}
    points = {s: [(sid, step, v) for (sid, step), v in zip(cells, values[s], strict=True)] for s in STREAMS}
    if not same:  # one stream lacks a point: no short cut
        points["power_w"] = points["power_w"][1:]
    parser, frames = _page(series, points)
    fast = page_frame("c1", parser, frames, WEIGHTS, STEP, "max")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(page_frames, "_aligned", lambda *args: None)
        general = page_frame("c1", parser, frames, WEIGHTS, STEP, "max")
    assert fast.equals(general)


def test_the_short_cut_is_taken_for_aligned_streams_without_a_shared_step() -> None:
    parser, frames = _page([(0, "1"), (1, "2")], {s: [(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0)] for s in
                                                   STREAMS})
    aligned = page_frames._aligned(parser, parser.series_frame(), frames, STEP)
    assert aligned is not None and aligned.height == 3
    # Two series of one GPU at one step (a job boundary) leave it to resolve.
    parser, frames = _page([(0, "1"), (0, "2")], {s: [(0, 0, 1.0), (1, 0, 3.0)] for s in STREAMS})
    assert page_frames._aligned(parser, parser.series_frame(), frames, STEP) is None
    assert np.array_equal(page_frame("c1", parser, frames, WEIGHTS, STEP, "max")["job_id"].to_numpy(),
                          np.array(["1,2"], dtype=object))
