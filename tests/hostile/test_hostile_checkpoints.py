"""The checkpoint collector's log presets and annotation values against hostile text: no exception escapes,
and whatever becomes a row is one the contract holds (a time between 1970 and year 9999, a finite step);
everything else is quarantined, never dropped."""

from __future__ import annotations

import math
from datetime import UTC

import pytest
from hostile_values import HOSTILE, text
from hypothesis import given
from hypothesis import strategies as st

from preemptlens.collectors.checkpoints import Point, frame, monotonic, readable
from preemptlens.collectors.checkpoints.kubernetes import _when
from preemptlens.collectors.checkpoints.logs import PRESETS, LogReader, patterns
from preemptlens.contract import MAX_EPOCH_S

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
