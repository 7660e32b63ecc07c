"""How a figure reads, wherever it is shown: pages, the weekly report (HTML and Markdown), victim notices, alerts,
the commands' text.

One wording per kind of figure: `duration` words a span of time, `quantity` a value in its unit, `change` a
signed change in its unit, `measure` a readiness measure. GPU-hours carry a thousands separator and fewer
decimals as they grow, times are UTC, shares are percent and a change of a share is in points; a minus is
always "-" (a metric's delta reads a leading "-" as a fall). An unknown figure reads "unknown", never 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

UNKNOWN = "unknown"


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(float(value))


def number(value: float | None, digits: int | None = None) -> str:
    """A quantity with a thousands separator: one decimal below 100, none from 100 on (unless `digits`). A value
    that is not 0 never reads 0: it gets the decimals that show its first digit (0.03, not 0.0)."""
    if not _known(value):
        return UNKNOWN
    value = float(value)  # type: ignore[arg-type]
    if digits is None:
        digits = 1 if abs(value) < 100 else 0
    if value and abs(value) < 0.5 * 10.0 ** -digits:
        digits = -math.floor(math.log10(abs(value)))
        # its first digit, rounded, may carry into the next place (0.096 at two decimals reads 0.10)
        digits -= 1 if round(abs(value), digits) >= 10.0 ** (1 - digits) else 0
    text = f"{value:,.{digits}f}"
    # "-0.0" reads as a loss that is not there.
    return text[1:] if text.startswith("-") and float(text.replace(",", "")) == 0 else text


def significant(value: float | None) -> str:
    """Enough digits to show a small figure's size, never e-notation: 1,234; 12.3; 1.84; 0.0123."""
    if not _known(value):
        return UNKNOWN
    value = float(value)  # type: ignore[arg-type]
    if value == 0:
        return "0"
    return number(value, max(0, 2 - math.floor(math.log10(abs(value)))) if abs(value) < 100 else 0)


def gpu_hours(value: float | None, digits: int | None = None) -> str:
    return UNKNOWN if not _known(value) else f"{number(value, digits)} GPU-h"


def duration(seconds: float | None) -> str:
    """A span of time as a person says it: 45 s, 38 min, 5.2 h, 3.1 days (6,000 s is "1.7 h")."""
    if not _known(seconds):
        return UNKNOWN
    seconds = float(seconds)  # type: ignore[arg-type]
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    if 0 < seconds < 1:
        text = f"{number(seconds)} s"  # not "0 s": it is not 0
    elif seconds < 90:
        text = f"{seconds:.0f} s"
    elif seconds < 5400:
        text = f"{seconds / 60:.0f} min"
    elif seconds < 2 * 86400:
        text = f"{seconds / 3600:.1f} h"
    else:
        text = f"{seconds / 86400:.1f} days"
    # "-0 s" reads as a change that is not there.
    return text if text == "0 s" else sign + text


def pct(share: float | None, digits: int | None = None) -> str:
    """A share in percent: whole percent, or one decimal for a small share that whole percent would round away
    (0.4%); `digits` fixes the decimals."""
    if not _known(share):
        return UNKNOWN
    share = float(share)  # type: ignore[arg-type]
    if digits is None:
        digits = 0 if abs(share) >= 0.1 or abs(share - round(share, 2)) < 1e-9 else 1
    return f"{number(share * 100, digits)}%"


def plural(count: int, word: str, many: str | None = None) -> str:
    """'1 GPU', '8 GPUs', '1,019 preemptions'."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def gpus(count: int | None) -> str:
    """A number of GPUs: '1 GPU', '8 GPUs', '? GPUs' when unknown."""
    return "? GPUs" if count is None else plural(int(count), "GPU")


def band_label(age_from_s: float, age_to_s: float | None) -> str:
    """An age band of a run (preemption_hazard): "0 to 15 min", "8.0 h to 1.0 days", "3.0 days and older"."""
    start = "0" if age_from_s == 0 else duration(age_from_s)
    return f"{start} and older" if age_to_s is None else f"{start} to {duration(age_to_s)}"


# The units `quantity` and `change` know; any other unit is a noun written after the number ("jobs", "GPU-h").
DURATION, SHARE, POINTS, WEEKLY_POINTS, RATIO, GPU_H = "s", "share", "points", "points a week", "ratio", "GPU-h"


def quantity(value: float | None, unit: str = "") -> str:
    """A value in its unit: seconds as a duration, a share in percent, a change of a share in points (or points a
    week), a ratio as "1.25×", GPU-hours as `gpu_hours`, a count with its unit's noun and enough digits to show
    its size ("0.0123 preemptions per GPU-hour"), a bare number as `number`."""
    if not _known(value):
        return UNKNOWN
    value = float(value)  # type: ignore[arg-type]
    if unit == DURATION:
        return duration(value)
    if unit == SHARE:
        return pct(value)
    if unit in (POINTS, WEEKLY_POINTS):
        return f"{number(value * 100, 1)} {unit}"
    if unit == RATIO:
        return f"{number(value, 2)}×"
    if unit == GPU_H:
        return gpu_hours(value)
    return f"{significant(value)} {unit}" if unit else number(value)


def change(value: float | None, unit: str = "") -> str:
    """A signed change in its unit, its sign always written (+5 min, -1.2 GPU-h, +0.8 points); a change of a
    share is in points, not percent. A change that rounds to nothing reads "no change"."""
    if not _known(value):
        return UNKNOWN
    text = quantity(value, POINTS if unit == SHARE else unit)
    if not any(c.isdigit() and c != "0" for c in text.split(" ")[0]):
        return "no change"
    return text if text.startswith("-") else f"+{text}"


def holds_zero(low: float | None, high: float | None) -> bool:
    """Whether an interval leaves a figure's sign unknown: it holds 0 and is not the point 0."""
    return _known(low) and _known(high) and float(low) <= 0 <= float(high) and bool(low or high)  # type: ignore[arg-type]


def not_told_from_zero(low: float | None, high: float | None, unit: str = "") -> str:
    """How a figure whose interval holds 0 reads, with both signs: 'cannot be told from 0 (-3.1 GPU-h to +20 GPU-h)'."""
    return f"cannot be told from 0 ({change(low, unit)} to {change(high, unit)})"


def uncertain_change(value: float | None, low: float | None, high: float | None, unit: str = "") -> str:
    """A signed change with its interval, '+12 GPU-h [+3.1 GPU-h, +20 GPU-h]'. An interval that holds 0 gives the
    change no sign: 'cannot be told from 0 (-3.1 GPU-h to +20 GPU-h)'. Without an interval, the change alone."""
    if not _known(value):
        return UNKNOWN
    if not _known(low) or not _known(high):
        return change(value, unit)
    if holds_zero(low, high):
        return not_told_from_zero(low, high, unit)
    if not (low or high):
        return change(value, unit)
    return f"{change(value, unit)} [{change(low, unit)}, {change(high, unit)}]"


def before_after(before: float | None, after: float | None, unit: str = "") -> str:
    """A replayed or measured figure before and after a change, and the change: '478.4 -> 459.5 (-18.9) GPU-h',
    all three with the decimals that show the smallest of them to three digits; durations as durations
    ('12 min -> 8 min (-4 min)'); the same on both sides reads 'unchanged at ...'."""
    if not _known(before) or not _known(after):
        return f"{quantity(before, unit)} -> {quantity(after, unit)}"
    before, after = float(before), float(after)  # type: ignore[arg-type]
    if unit == DURATION:
        if duration(before) == duration(after):
            return f"unchanged at {duration(after)}"
        return f"{duration(before)} -> {duration(after)} ({change(after - before, DURATION)})"
    delta = after - before
    sizes = [abs(v) for v in (before, after, delta) if v]
    digits = max(0, min(6, 2 - math.floor(math.log10(min(sizes))))) if sizes else 0
    if number(before, digits) == number(after, digits):
        return f"unchanged at {significant(after)}" + (f" {unit}" if unit else "")
    shown = number(delta, digits)
    return (f"{number(before, digits)} -> {number(after, digits)} ({shown if shown.startswith('-') else '+' + shown})"
            + (f" {unit}" if unit else ""))


def money(gpu_h: float | None, price: float, currency: str) -> str | None:
    """GPU-hours at `price` per GPU-hour; None when no price is set (dashboard.gpu_hour_price = 0)."""
    if not price:
        return None
    return UNKNOWN if not _known(gpu_h) else f"{number(float(gpu_h) * price, 0)} {currency}"  # type: ignore[arg-type]


def when(value: datetime | None) -> str:
    return UNKNOWN if value is None else f"{value:%Y-%m-%d %H:%M} UTC"


def day(value: datetime | None) -> str:
    return UNKNOWN if value is None else f"{value:%Y-%m-%d}"


def window(start: datetime, end: datetime) -> str:
    """A half-open window [start, end) as a reader says it: whole UTC days by their first and last day
    ('2026-11-23 to 2026-11-29 UTC', the end's day left out), any other to the minute, the end excluded
    ('2026-11-23 10:00 to 2026-11-29 14:30 UTC')."""
    if all((t.hour, t.minute, t.second, t.microsecond) == (0, 0, 0, 0) for t in (start, end)):
        last = end - timedelta(days=1)
        return f"{start:%Y-%m-%d} UTC" if last <= start else f"{start:%Y-%m-%d} to {last:%Y-%m-%d} UTC"
    return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"


def iso_week(value: datetime) -> str:
    """The ISO week a day falls in, e.g. 2026-W48 (Monday to Sunday)."""
    year, week, _ = value.isocalendar()
    return f"{year}-W{week:02d}"


# One label per definition of work thrown away (docs/figures.md, sections 3 and 10). The ledger's figures, recorded
# from what happened, keep the plain names; a replay's say that they are replayed and how far.
LOST_PROGRESS = "lost progress"  # recorded: victims' GPUs x progress since their last checkpoint
THROWN_AWAY = "work thrown away"  # recorded: lost progress + the restarts' warm-up
LOST_PROGRESS_REPLAYED = "lost progress, replayed in the window"  # preemptions inside the window of a replay
THROWN_AWAY_REPLAYED = "work thrown away, replayed in the window"  # the same preemptions, with their warm-up
THROWN_AWAY_DRAINED = "work thrown away, replayed to completion"  # the counterfactual: every preemption until
# the window's jobs are done

# Why a recorded figure and a replayed one differ (one sentence wherever both are shown).
RECORDED_VS_REPLAYED = (
    "Recorded figures are the preemption ledger's, measured on what happened in the window, each preemption "
    "against the wait it saved its preemptor; replayed figures re-run the same jobs through the scheduler model "
    "to their completion, today's policy against no preemption at all, so they also count every job the "
    "preemptions delayed, waiting after the window's end, and the replay's own error."
)

# The readiness measures (readiness_evidence.measure): each one's label, the unit its value is in, and what it
# means. A measure not listed (one added later) reads as its words, with its unit guessed from its name.
MEASURES: Mapping[str, tuple[str, str, str]] = {
    "busy_hours_share": ("busy hours without preemption", SHARE,
                         "hours in which the GPUs doing work (not idle-hoarded) reach "
                         "analytics.scarce_allocation_share of capacity when the recorded jobs are replayed without "
                         "preemption"),
    "busy_hours_share_with_idle": ("busy hours counting idle-hoarded GPUs as busy", SHARE,
                                   "busy hours without preemption with the idle-hoarded GPUs left in"),
    "queue_pressure_hours_share": ("hours under queue pressure", SHARE,
                                   "hours in which work worth analytics.scarce_queue_share of capacity waits"),
    "queued_gpu_wait_s": ("queue time per GPU of a job", DURATION,
                          "GPU-weighted mean of each job's time in the queue, first wait and waits to restart"),
    "jobs_never_fit": ("jobs larger than their pool", "jobs", "they can never start, so Q1 leaves them out"),
    "high_wait_unpreempted_p50_s": ("median wait of critical and high work without preemption", DURATION, ""),
    "high_gpu_hour_share": ("critical+high share of GPU-hours", SHARE, "GPU-hours of runs"),
    "high_share_weekly_slope_abs": ("weekly change of the critical+high share of demand", WEEKLY_POINTS,
                                    "GPUs asked for at submission, fitted over the last weeks"),
    "checkpoint_coverage": ("preemptible GPU-hours with checkpoint data", SHARE, ""),
    "loss_to_gain": ("work thrown away per GPU-hour of wait saved", RATIO, ""),
    "visibility": ("preemptions recording a reason and a preemptor", SHARE, ""),
    "hoarded_share_of_allocated": ("allocated GPU-hours held idle", SHARE, ""),
    "avoidable_share": ("preemptions that idle-hoarded GPUs could have served", SHARE, ""),
}


def _unit_of(name: str) -> str:
    if name in MEASURES:
        return MEASURES[name][1]
    if name.endswith("_s"):
        return DURATION
    if name.endswith(("_share", "_coverage")):
        return SHARE
    return ""


def measure_label(name: str) -> str:
    return MEASURES[name][0] if name in MEASURES else name.removesuffix("_s").replace("_", " ")


def measure(name: str, value: float | None) -> str:
    """A readiness measure's value (or threshold, or bound) in its unit."""
    return quantity(value, _unit_of(name))


def measure_text(row: Mapping[str, Any]) -> str:
    """One row of readiness_evidence in words: 'busy hours without preemption 19% [13%, 27%] (needs at least 50%)',
    or why it is unknown."""
    name = str(row["measure"])
    if row["value"] is None:
        return f"{measure_label(name)}: unknown ({row.get('missing') or 'not measured'})"
    text = f"{measure_label(name)} {measure(name, row['value'])}"
    if row.get("low") is not None and row.get("high") is not None:
        text += f" [{measure(name, row['low'])}, {measure(name, row['high'])}]"
    if row.get("threshold") is not None:
        needs = {">=": "at least", ">": "more than", "<=": "at most", "<": "less than"}.get(str(row.get("comparison")),
                                                                                             "")
        text += f" (needs {needs + ' ' if needs else ''}{measure(name, row['threshold'])})"
    if row.get("borderline"):
        text += ", borderline"
    return text
