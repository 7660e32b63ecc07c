"""One wording per kind of figure (preemptlens/reading/words.py), and no outlet wording one by hand.

6,000 s read "1.7 h", "100 min", "1.66667 h", "1 h 40 min" or "100m" depending on the outlet, and minus signs
mixed U+2212 and "-" on one screen: every outlet now calls the one function of its kind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from preemptlens.reading.words import (
    DURATION,
    GPU_H,
    SHARE,
    before_after,
    change,
    duration,
    gpus,
    measure,
    measure_text,
    quantity,
    uncertain_change,
    window,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("seconds", "words"), [(45, "45 s"), (6000, "1.7 h"), (2280, "38 min"),
                                                (3 * 86400, "3.0 days"), (-6000, "-1.7 h"), (0, "0 s"),
                                                (None, "unknown")])
def test_a_duration_reads_one_way(seconds: float | None, words: str) -> None:
    assert duration(seconds) == words
    assert quantity(seconds, DURATION) == words


def test_a_change_has_its_sign_and_a_shares_change_is_in_points() -> None:
    assert change(-6000, DURATION) == "-1.7 h" and change(300, DURATION) == "+5 min"
    assert change(0.012, SHARE) == "+1.2 points" and change(-1.5, GPU_H) == "-1.5 GPU-h"
    assert change(0.0, DURATION) == change(0.0) == "no change"
    # a change that is not 0 never reads as none (issue 31.5)
    assert change(0.001) == "+0.001" and change(-0.3, DURATION) == "-0.3 s"
    assert before_after(720, 480, DURATION) == "12 min -> 8 min (-4 min)"
    assert before_after(0, 0, DURATION) == "unchanged at 0 s", "a wait the change does not move says so"


def test_a_measure_reads_in_its_unit_with_its_label() -> None:
    assert measure("queued_gpu_wait_s", 6000) == "1.7 h"
    assert measure("high_share_weekly_slope_abs", 0.012) == "1.2 points a week"
    assert measure("visibility", 0.004) == "0.4%" and measure("visibility", 0.5) == "50%"
    row = {"measure": "jobs_never_fit", "value": 0.0, "low": None, "high": None, "threshold": None,
           "comparison": None}
    assert measure_text(row) == "jobs larger than their pool 0 jobs", "no 'needs None unknown'"
    unknown = measure_text({**row, "value": None, "missing": "no jobs"})
    assert unknown == "jobs larger than their pool: unknown (no jobs)"


def test_a_window_reads_one_way() -> None:
    """Pages, the report, the verdict and the suggestions all say a window so: whole days by their first and
    last day, else to the minute with the end left out."""
    from datetime import UTC, datetime

    monday, next_monday = datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)
    assert window(monday, next_monday) == "2026-11-23 to 2026-11-29 UTC"
    assert window(monday, datetime(2026, 11, 24, tzinfo=UTC)) == "2026-11-23 UTC"
    assert window(monday, datetime(2026, 11, 29, 20, 10, tzinfo=UTC)) == "2026-11-23 00:00 to 2026-11-29 20:10 UTC"


def test_counts_of_gpus_agree_with_their_number() -> None:
    assert (gpus(1), gpus(8), gpus(None)) == ("1 GPU", "8 GPUs", "? GPUs")


# A duration or a share worded by hand: seconds divided into minutes, hours or days and formatted, or Python's
# percent format (not plotly's "%{y:.0%}"); and the other minus sign.
BY_HAND = re.compile(r"/ ?(?:60|3600|86400)[^}\n]*:[^}\n]*\} ?(?:min|h|days)\b|(?<!%)\{[^{}]*:[+]?\.\d%\}|\u2212")


def test_no_outlet_words_a_duration_a_share_or_a_minus_by_hand() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for folder in ("analytics", "dashboards", "preemptlens/commands", "preemptlens/reading")
             for path in sorted((ROOT / folder).rglob("*.py")) if path.name != "words.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if BY_HAND.search(line)]
    assert found == []


@pytest.mark.parametrize(("value", "unit", "words"), [
    (0.03, GPU_H, "0.03 GPU-h"), (-0.004, GPU_H, "-0.004 GPU-h"), (0.096, "", "0.1"), (0.00096, "", "0.001"),
    (0.3, DURATION, "0.3 s"), (0.00004, SHARE, "0.004%"), (0.0, GPU_H, "0.0 GPU-h"),
])
def test_a_figure_that_is_not_zero_never_reads_zero(value: float, unit: str, words: str) -> None:
    """The headline once printed "it cost 0.0 GPU-h thrown away" for 0.03 GPU-h (issue 31.5)."""
    assert quantity(value, unit) == words


def test_a_change_whose_interval_holds_zero_has_no_sign() -> None:
    assert uncertain_change(12.0, 3.1, 20.0, GPU_H) == "+12.0 GPU-h [+3.1 GPU-h, +20.0 GPU-h]"
    text = uncertain_change(-12.0, -30.0, 4.0, GPU_H)
    assert text == "cannot be told from 0 (-30.0 GPU-h to +4.0 GPU-h)" and "-12" not in text
    assert uncertain_change(-0.02, -0.05, -0.01, GPU_H).startswith("-0.02 GPU-h [")
    assert uncertain_change(5.0, None, None, GPU_H) == "+5.0 GPU-h" and uncertain_change(0.0, 0.0, 0.0) == "no change"
