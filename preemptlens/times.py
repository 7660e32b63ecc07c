"""Times and durations as operators type them; the one parser every command uses.

A time is ISO 8601 (no offset means UTC; `Z` is accepted), epoch seconds
(`1764770400`, `1764770400.5`), `now`, or a Prometheus-style duration that
many seconds before now (`10m`, `2h`, `7d`, `1h30m`). A duration is the
Prometheus grammar: one or more `<integer><unit>` with units ms, s, m, h, d,
w, y.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from preemptlens.errors import ConfigError

_EPOCH = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", re.ASCII)
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)", re.ASCII)
_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
    "y": 31_536_000_000,
}
TIME_HELP = "ISO 8601 (UTC if no offset), epoch seconds, or a duration before now such as 10m, 2h, 7d"


def parse_duration_ms(text: str, setting: str) -> int:
    """A Prometheus duration (`90s`, `1h30m`) in milliseconds."""
    text = text.strip()
    if not text or not text.isascii() or _DURATION.sub("", text) != "":
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise ConfigError(f"{setting}: {shown!r} is not a duration", "write it as Prometheus does: 30s, 1m, 6h, 7d")
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _DURATION.findall(text))


# The times a command accepts: a time outside them is a typing error, and would overflow the arithmetic
# of the windows that start or end there.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def parse_when(text: str, option: str, now: datetime | None = None) -> datetime:
    """An aware UTC datetime from what an operator typed for `option` (e.g. `--since`), from 1970 to 2200."""
    text = text.strip()
    now = now if now is not None else datetime.now(UTC)
    shown = text if len(text) <= 60 else text[:60] + "..."
    try:
        when = _parse_when(text, option, now)
    except OverflowError:
        when = None
    if when is None or not EARLIEST <= when <= LATEST:
        raise ConfigError(f"{option}: {shown!r} is out of range", f"give a time from {EARLIEST:%Y} to {LATEST:%Y}")
    return when


def _parse_when(text: str, option: str, now: datetime) -> datetime:
    if text.lower() == "now":
        return now
    if _EPOCH.match(text):
        try:
            return datetime.fromtimestamp(float(text), UTC)
        except (ValueError, OverflowError, OSError):
            pass
    if text and _DURATION.sub("", text) == "":
        return now - timedelta(milliseconds=parse_duration_ms(text, option))
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise ConfigError(f"{option}: {shown!r} is not a time", f"give {TIME_HELP}") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
