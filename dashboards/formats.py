"""How a figure reads, wherever it is shown (the dashboard's pages, the weekly report's HTML and Markdown).

One place for units and rounding: GPU-hours with a thousands separator and fewer decimals as they grow,
durations as durations, times in UTC, shares in percent, and money when a price per GPU-hour is set. An
unknown figure reads "unknown", never 0.
"""

from __future__ import annotations

from datetime import datetime

UNKNOWN = "unknown"


def number(value: float | None, digits: int | None = None) -> str:
    """A quantity with a thousands separator: one decimal below 100, none from 100 on (unless `digits`)."""
    if value is None:
        return UNKNOWN
    value = float(value)
    if digits is None:
        digits = 1 if abs(value) < 100 else 0
    text = f"{value:,.{digits}f}"
    # "-0.0" reads as a loss that is not there.
    return text[1:] if text.startswith("-") and float(text.replace(",", "")) == 0 else text


def signed(value: float | None, digits: int | None = None) -> str:
    """Like `number`, with its sign always written (+ or -); st.metric reads a leading '-' as a fall."""
    if value is None:
        return UNKNOWN
    text = number(value, digits)
    return text if text.startswith("-") or text.replace("0", "").replace(".", "").replace(",", "") == "" \
        else f"+{text}"


def gpu_hours(value: float | None, digits: int | None = None) -> str:
    return UNKNOWN if value is None else f"{number(value, digits)} GPU-h"


def duration(seconds: float | None) -> str:
    """A duration as a person says it: 45 s, 38 min, 5.2 h, 3.1 days."""
    if seconds is None:
        return UNKNOWN
    seconds = float(seconds)
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    if seconds < 90:
        text = f"{seconds:.0f} s"
    elif seconds < 5400:
        text = f"{seconds / 60:.0f} min"
    elif seconds < 2 * 86400:
        text = f"{seconds / 3600:.1f} h"
    else:
        text = f"{seconds / 86400:.1f} days"
    return sign + text


def signed_duration(seconds: float | None) -> str:
    if seconds is None:
        return UNKNOWN
    return ("+" if seconds > 0 else "") + duration(seconds) if round(seconds) else "no change"


def when(value: datetime | None) -> str:
    return UNKNOWN if value is None else f"{value:%Y-%m-%d %H:%M} UTC"


def day(value: datetime | None) -> str:
    return UNKNOWN if value is None else f"{value:%Y-%m-%d}"


def iso_week(value: datetime) -> str:
    """The ISO week a day falls in, e.g. 2026-W48 (Monday to Sunday)."""
    year, week, _ = value.isocalendar()
    return f"{year}-W{week:02d}"


def pct(share: float | None, digits: int = 0) -> str:
    return UNKNOWN if share is None else f"{share * 100:.{digits}f}%"


def points(share_change: float | None) -> str:
    """A change of a share, in percentage points."""
    return UNKNOWN if share_change is None else f"{share_change * 100:+.1f} points"


def money(gpu_h: float | None, price: float, currency: str) -> str | None:
    """GPU-hours at `price` per GPU-hour; None when no price is set (dashboard.gpu_hour_price = 0)."""
    if not price:
        return None
    return UNKNOWN if gpu_h is None else f"{number(gpu_h * price, 0)} {currency}"


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


# The readiness measures (readiness_evidence.measure): what each says, and its unit. A measure not listed
# (one added later) reads as its words, with its unit guessed from its name.
MEASURES: dict[str, tuple[str, str]] = {
    "busy_hours_share": ("hours with most GPUs doing work", "share"),
    "queue_pressure_hours_share": ("hours with much work waiting", "share"),
    "lower_tier_wait_p50_s": ("median wait of normal and low jobs before their first start", "duration"),
    "high_wait_unpreempted_p50_s": ("median wait of critical and high work without preemption", "duration"),
    "high_gpu_hour_share": ("critical + high share of GPU-hours", "share"),
    "high_share_weekly_slope_abs": ("weekly change of the critical + high share", "points"),
    "checkpoint_coverage": ("preemptible GPU-hours of checkpointing jobs", "share"),
    "loss_to_gain": ("measured GPU-hours lost per GPU-hour of wait saved", "ratio"),
    "visibility": ("preemptions whose preemptor is known", "share"),
    "hoarded_share_of_allocated": ("allocated GPU-hours held idle", "share"),
}


def _unit_of(name: str) -> str:
    if name.endswith("_s"):
        return "duration"
    if name.endswith(("_share", "_coverage")):
        return "share"
    return "number"


def measure_label(name: str) -> str:
    return MEASURES[name][0] if name in MEASURES else name.removesuffix("_s").replace("_", " ")


def measure_value(name: str, value: float | None) -> str:
    """A readiness measure's value (or threshold) in its unit."""
    if value is None:
        return UNKNOWN
    unit = MEASURES[name][1] if name in MEASURES else _unit_of(name)
    if unit == "share":
        return pct(value)
    if unit == "duration":
        return duration(value)
    if unit == "points":
        return f"{value * 100:.1f} points"
    if unit == "ratio":
        return f"{value:,.2f}×"
    return number(value, 2 if abs(value) < 10 else None)


COMPARISONS = {">=": "≥", "<=": "≤", ">": ">", "<": "<", "=": "="}


def measure_text(row: dict[str, object]) -> str:
    """One row of readiness_evidence in words: 'label value (needs ≥ threshold)', or why it is unknown."""
    name = str(row["measure"])
    value = row["value"]
    if value is None:
        return f"{measure_label(name)}: unknown ({row['missing'] or 'not measured'})"
    needs = f"{COMPARISONS.get(str(row['comparison']), row['comparison'])} {measure_value(name, row['threshold'])}"  # type: ignore[arg-type]
    return f"{measure_label(name)}: {measure_value(name, value)} (needs {needs})"  # type: ignore[arg-type]


def pilot_value(value: float | None, unit: str, sign: bool = False) -> str:
    """A pilot figure in its unit: seconds as a duration, shares in percent, counts with their noun."""
    if value is None:
        return "unknown"
    plus = "+" if sign and value > 0 else ""
    if unit == "s":
        return plus + duration(value)
    if unit == "share":
        return f"{value * 100:+.2f}%" if sign else pct(value, 2)
    return f"{plus}{number(value, 2 if abs(value) < 10 else None)} {unit}"


def band_label(age_from_s: float, age_to_s: float | None) -> str:
    """An age band of a run (preemption_hazard): "0 to 15 min", "8.0 h to 1.0 days", "3.0 days and older"."""
    start = "0" if age_from_s == 0 else duration(age_from_s)
    return f"{start} and older" if age_to_s is None else f"{start} to {duration(age_to_s)}"
