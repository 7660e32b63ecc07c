"""The checkpoint collector's log presets and annotation values against hostile text, and every stream (logs and
pod logs, Prometheus samples, annotations, checkpoint files) with times equal to a running run's start, before
it, NaN or far: no exception escapes, a point is attributed to the run on at its time, and whatever becomes a
row is one the contract holds (a time between 1970 and year 9999, a finite step); everything else is
quarantined, never dropped."""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hostile_values import HOSTILE, text
from hypothesis import given
from hypothesis import strategies as st

from preemptlens.collectors.checkpoints import Point, frame, monotonic, readable
from preemptlens.collectors.checkpoints.files import Cursor, Walker, root_of
from preemptlens.collectors.checkpoints.jobs import Runs
from preemptlens.collectors.checkpoints.kubernetes import _when, annotation_points
from preemptlens.collectors.checkpoints.logs import PRESETS, LogReader, patterns
from preemptlens.collectors.checkpoints.metrics import _reached, _saves
from preemptlens.collectors.prometheus import range_result
from preemptlens.contract import MAX_EPOCH_S
from preemptlens.errors import SourceError

pytestmark = pytest.mark.hostile

READER = LogReader(patterns(list(PRESETS), r"custom (?P<step>\S+) at (?P<time>\S+)", ""), UTC, 4096, 1 << 20)
# Lines of every preset with a hole where a hostile value goes.
TEMPLATES = (
    "{ts} x Saving model checkpoint to out/checkpoint-{v}",
    "{ts} x Continuing training from global step {v}",
    "{ts} x Epoch 0, global step {v}: 'step' reached 1 (best 1), saving model to 'c/epoch=0-step={v}.ckpt'",
    "[{ts}] saving checkpoint at iteration {v} to /c in torch_dist format",
    "  [{ts}] successfully saved checkpoint from iteration {v} to /c [ t 1/1 ]",
    " [{ts}] iteration {v}/ 1000 | consumed samples: 1 |",
    "{ts} x [Torch] Checkpoint global_step{v} is ready now!",
    "{ts} x step: {v}  loss: 1.0",
    "{ts} x Finished saving the checkpoint in {v} seconds.",
    "{ts} x Epoch {v}: finished saving model to m.keras",
    "custom {v} at {ts}",
)
STAMPS = st.one_of(
    st.sampled_from(["2026-09-21 12:00:01,000", "2026-09-21T12:00:01Z", "9999-12-31 23:59:59", "0001-01-01 00:00:00",
                     "2026-13-45 25:61:61", "2026-09-21 12:00:01+99:99", ""]),
    text,
)
VALUES = st.one_of(st.integers(min_value=-(10**30), max_value=10**30).map(str),
                   st.sampled_from(["nan", "inf", "1e400", "٣", "00000000000000000000000001"]), text)


@HOSTILE
@given(st.lists(st.tuples(st.sampled_from(TEMPLATES), STAMPS, VALUES), min_size=1, max_size=8))
def test_hostile_log_lines_become_valid_rows_or_quarantine(lines: list[tuple[str, str, str]]) -> None:
    texts = [template.format(ts=ts, v=v) for template, ts, v in lines]
    found = READER.lines_of(texts, "hostile.log")
    points = [Point("j1", 1, line.time, line.kind, line.step, line.save_s, line.origin, line.record) for line in found]
    kept, rejects = readable(points, "logs")
    kept, backwards = monotonic(kept, {}, "logs")
    rows = frame("c1", kept)
    assert rows.height == len(kept)
    for p in kept:
        assert 0 <= p.time <= MAX_EPOCH_S
        assert p.step is None or math.isfinite(p.step)
    assert len(kept) + len(rejects) + len(backwards) == len(points)


@HOSTILE
@given(st.one_of(text, st.floats(allow_nan=True).map(str), st.integers().map(str)))
def test_hostile_annotation_times_are_a_time_or_none(value: str) -> None:
    when = _when(value)
    assert when is None or 946_684_800 <= when < 32_503_680_000


# -- every stream against running runs: times equal to a run's start, before it (reversed), NaN and far --------

BASE = 1_790_000_000.0
CLUSTER = "c1"
# (offset of a run's start from BASE, how it ends): a running run has no end; a reversed one ends before it began
# (a scheduler's clock stepping back); "far" ends in the year 5138.
SPANS = st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, -1.0, 30.0]),
                           st.sampled_from(["running", "reversed", "zero", "far", "ended"])), min_size=1, max_size=4)
# a time as an offset of a run's start (equal, just before or after it), or a hostile absolute one
RELATIVE = st.sampled_from([0.0, -0.5, 0.5, -5.0, 1.0])
ABSOLUTE = st.sampled_from([math.nan, math.inf, -math.inf, 1e20, -1e20, 0.0, -1.0, float(MAX_EPOCH_S),
                            float(MAX_EPOCH_S) + 1, 253_402_300_800.0, 32_503_680_000.0])
WHEN = st.one_of(st.tuples(st.integers(0, 3), RELATIVE), ABSOLUTE, st.floats(allow_nan=True, allow_infinity=True))


def _runs(spans: list[tuple[float, str]]) -> tuple[Runs, list[float]]:
    rows = []
    starts = []
    for run, (offset, how) in enumerate(spans, start=1):
        start = BASE + offset
        end = {"running": None, "reversed": start - 5.0, "zero": start, "far": 1e11, "ended": start + 60.0}[how]
        starts.append(start)
        rows.append({"cluster": CLUSTER, "job_id": "j1", "run": run, "start_time": datetime.fromtimestamp(start, UTC),
                     "end_time": None if end is None else datetime.fromtimestamp(end, UTC), "user_name": "u",
                     "team": "ns", "name": "pod-1", "work_dir": None, "stdout_path": None, "stderr_path": None,
                     "source": "kubernetes"})
    frame_ = pl.DataFrame(rows, schema={
        "cluster": pl.String, "job_id": pl.String, "run": pl.Int32, "start_time": pl.Datetime("us", "UTC"),
        "end_time": pl.Datetime("us", "UTC"), "user_name": pl.String, "team": pl.String, "name": pl.String,
        "work_dir": pl.String, "stdout_path": pl.String, "stderr_path": pl.String, "source": pl.String})
    labels = pl.DataFrame({"cluster": [CLUSTER], "label": ["ns/pod-1"], "job_id": ["j1"]})
    return Runs.from_frames(frame_, labels), starts


def _time(when: Any, starts: list[float]) -> float:
    if isinstance(when, tuple):
        return starts[when[0] % len(starts)] + when[1]
    return float(when)


def _stamp(t: float) -> str:
    try:
        return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):
        return repr(t)


def _rows_hold(points: list[Point], runs: Runs, stream: str) -> None:
    """What a stream hands on: each point's run is the one on at its time (a run started that very second
    included), and readable, monotonic and frame keep or quarantine every point, raising nothing."""
    for p in points:
        if p.time == p.time:
            on = [r for s, e, r in runs.runs[(CLUSTER, "j1")] if s <= p.time and (e is None or p.time < e + 1.0)]
            assert (p.run is None) == (not on), (p.time, p.run, on)
    kept, untimed = readable(points, stream)
    kept, backwards = monotonic(kept, {}, stream)
    assert frame(CLUSTER, kept).height == len(kept)
    assert len(kept) + len(untimed) + len(backwards) == len(points)


@HOSTILE
@given(SPANS, st.lists(st.tuples(WHEN, VALUES), min_size=1, max_size=6))
def test_log_and_pod_log_lines_at_hostile_times_against_running_runs(spans: list[tuple[float, str]],
                                                                     lines: list[tuple[Any, str]]) -> None:
    runs, starts = _runs(spans)
    texts = [f"{_stamp(_time(when, starts))} successfully saved checkpoint from iteration {v} to /c"
             for when, v in lines]
    found = READER.lines_of(texts, "hostile.log")
    points = [Point("j1", runs.run_at(CLUSTER, "j1", line.time), line.time, line.kind, line.step, line.save_s,
                    line.origin, line.record) for line in found]
    _rows_hold(points, runs, "logs")


@HOSTILE
@given(SPANS, st.lists(st.tuples(WHEN, st.one_of(WHEN, st.floats(allow_nan=True))), min_size=1, max_size=6))
def test_prometheus_samples_at_hostile_times_against_running_runs(spans: list[tuple[float, str]],
                                                                  samples: list[tuple[Any, Any]]) -> None:
    runs, starts = _runs(spans)
    values = []
    for when, value in samples:
        t, v = _time(when, starts), _time(value, starts) if isinstance(value, tuple) else float(value)
        values.append([t if math.isfinite(t) else 1e30, "NaN" if v != v else repr(v)])
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"hpc_job": "j1"}, "values": values}]}}).encode()
    try:
        answer = range_result(body)
    except SourceError:
        return  # an answer the reader refuses is named whole, as the Prometheus stream does
    rejects: list[Any] = []
    points = _reached(answer, CLUSTER, runs, rejects, "step") + _saves(answer, None, CLUSTER, runs, rejects, "saved")
    _rows_hold(points, runs, "prometheus")


@HOSTILE
@given(SPANS, st.lists(st.tuples(st.one_of(WHEN, text), st.one_of(VALUES, st.none())), min_size=1, max_size=6))
def test_annotations_at_hostile_times_against_running_runs(spans: list[tuple[float, str]],
                                                           marks: list[tuple[Any, str | None]]) -> None:
    runs, starts = _runs(spans)
    objects = []
    for k, (when, step) in enumerate(marks):
        raw = when if isinstance(when, str) else repr(_time(when, starts))
        annotations = {"example.com/ckpt-time": raw, **({} if step is None else {"example.com/ckpt-step": step})}
        objects.append({"metadata": {"namespace": "ns", "name": "pod-1", "uid": f"u{k}", "annotations": annotations}})
    points, rejects = annotation_points("pods", objects, "example.com/ckpt-time", "example.com/ckpt-step", CLUSTER,
                                        runs)
    assert len(points) + len(rejects) == len(objects)
    _rows_hold(points, runs, "annotations")


@pytest.mark.parametrize("how", ["equal", "reversed", "far", "before"])
def test_checkpoint_files_at_hostile_times_against_running_runs(tmp_path: Path, how: str) -> None:
    """The files stream end to end, a checkpoint's time (its file's mtime) equal to a running run's start, before
    it (its run's end before its start), or centuries on: the rest loads, nothing raises."""
    spans = [(-200.0, "reversed" if how == "reversed" else "ended"), (0.0, "running")]
    runs, starts = _runs(spans)
    at = {"equal": starts[1], "reversed": starts[0], "far": 20_000_000_000.0, "before": starts[0] - 100}[how]
    job = tmp_path / "scratch" / "j1"
    for step, t in ((10, at), (20, starts[1] + 5)):
        state = job / f"checkpoint-{step}" / "trainer_state.json"
        state.parent.mkdir(parents=True)
        state.write_text("{}")
        os.utime(state, (t, t))
    walker = Walker([root_of({"path": str(tmp_path / "scratch" / "{job_id}")})], ["hf_trainer"], [], 4, 1000)
    scan, _ = walker.scan(CLUSTER, runs, Cursor())
    points = [Point(r.job_id, r.run, r.time, "checkpoint", r.step, r.save_s, r.origin, r.record) for r in scan.rows]
    assert sorted(p.step for p in points if p.step is not None) == [10.0, 20.0]
    _rows_hold(points, runs, "files")
    if how == "equal":  # the running run, started that very second
        assert [p.run for p in points if p.step == 10.0] == [2]
