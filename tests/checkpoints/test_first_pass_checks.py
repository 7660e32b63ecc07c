"""The checks every stream's points pass through (readable, monotonic), on the shapes a first pass gives: many
points, nearly all readable, by job and time. A fast path that looks at the whole list at once must still find the
one point in thousands that is not a time, and the order the rows are kept in must stay by job, then time."""

from __future__ import annotations

import math

import pytest

from preemptlens.collectors.checkpoints import monotonic, readable
from preemptlens.collectors.checkpoints.jobs import Point
from preemptlens.contract import MAX_EPOCH_S

T0 = 1_790_000_000.0


def _point(job: str, t: float, step: float | None, n: int, run: int | None = 1) -> Point:
    return Point(job, run, t, "checkpoint", step, None, "files:hf_trainer", f"/scratch/{job}/checkpoint-{n}")


def _many() -> list[Point]:
    return [_point(f"j{i % 7}", T0 + i, float(i), i) for i in range(3000)]


@pytest.mark.parametrize(("time", "step", "field"), [
    (math.nan, 1.0, "time"),  # in the middle of the list: min() and max() of the times would not see it
    (math.inf, 1.0, "time"),
    (-1.0, 1.0, "time"),
    (MAX_EPOCH_S + 1, 1.0, "time"),
    (10**400, 1.0, "time"),  # an integer no float holds: the sum of the times cannot be taken
    (T0, math.nan, "step"),
    (T0, -math.inf, "step"),
])
def test_the_one_unreadable_point_among_thousands_is_quarantined(time: float, step: float, field: str) -> None:
    points = _many()
    bad = _point("j3", time, step, 99_999)
    points.insert(1500, bad)
    kept, rejects = readable(points, "files")
    assert kept == _many()
    assert [(r.record, r.field) for r in rejects] == [(bad.record, field)]


def test_readable_points_are_all_kept_as_they_came() -> None:
    points = [*_many(), _point("j1", 0.0, None, 1), _point("j1", MAX_EPOCH_S, None, 2)]
    assert readable(points, "files") == (points, [])


def test_kept_points_are_by_job_then_time_and_ties_keep_their_order() -> None:
    # Times out of order within a job, the same time in several jobs and twice in one job.
    points = [_point("b", T0 + 5, 5.0, 1), _point("a", T0 + 9, 9.0, 2), _point("b", T0 + 1, 1.0, 3),
              _point("a", T0 + 9, 10.0, 4), _point("c", T0 + 5, None, 5), _point("a", T0 + 2, 2.0, 6)]
    kept, rejects = monotonic(points, {}, "files")
    assert rejects == []
    assert [p.record.rsplit("-", 1)[1] for p in kept] == ["6", "2", "4", "3", "1", "5"]


def test_a_step_going_back_is_quarantined_and_the_latest_step_kept_per_job() -> None:
    last: dict[str, list[object]] = {}
    points = [_point("a", T0 + 1, 10.0, 1), _point("a", T0 + 2, 4.0, 2), _point("a", T0 + 3, 11.0, 3),
              _point("b", T0 + 1, 1.0, 4)]
    kept, rejects = monotonic(points, last, "files")
    assert [p.record for p in kept] == [points[0].record, points[2].record, points[3].record]
    assert [r.record for r in rejects] == [points[1].record]
    assert "from 10 to 4" in rejects[0].reason
    assert last == {"a": [1, 11.0, T0 + 3], "b": [1, 1.0, T0 + 1]}
