"""Configuration: one TOML file, documented settings, secrets by reference.

Where the file is: `--config`, else $PREEMPTLENS_CONFIG, else ./preemptlens.toml
when it exists; no file at all is fine (every setting has a default).

A section is one frozen dataclass, named after its TOML table, whose fields are
its settings; the module that declares it names it `SETTINGS` and is listed, with
the names of the sections it declares, in `preemptlens.registry.SECTIONS`:

    @section("pilot", "Pilot evaluation ...")
    @dataclass(frozen=True)
    class PilotSettings:
        before_days: float = setting(28.0, "Days before the change ...")
        pilots: dict[str, Any] = setting({}, "Declared pilots ...")
        webhook: Secret | None = setting(None, "Where ... (a secret)")

    SETTINGS = PilotSettings

The annotation is the setting's kind (what a value from the file or the
environment must be, and is converted to); `Secret` makes it a secret;
`setting()` adds the default, the help text (a test fails when one is missing
from docs/configuration.md) and optionally `choices`, a `check` and `bounds`.
Every number has a range, checked when the configuration is read: `bounds=(low,
high)`, else the range its unit gives (`UNITS`: a name ending `_s` is seconds,
one holding `share` a share from 0 to 1 ...), else its kind's (`KIND_BOUNDS`); a
list or table of numbers holds each member to it. Text that is a duration, a
size, a cron line, a URL or an address has a `check` (`duration_text`,
`size_text`, `cron_text`, `http_url`, `listen_address` ...). A check across
fields goes in `__post_init__` and raises ConfigError; `load_config` builds every
section, so those problems are reported with the rest, at start. Code reads a
section as that object, built once per Config: `config.of(PilotSettings).before_days`;
`PilotSettings()` holds the defaults and `PilotSettings(before_days=7.0)` (or
`Config(values={"pilot": {...}})`) builds one from plain values, as tests do;
`dataclasses.replace` overrides a few (command-line flags). The `Section`/`Setting` records that the
documentation, validation and environment overrides walk are derived from the
dataclass, so each setting is declared once.

A secret is never written into the file in clear if it can be helped: give
`{ "$env" = "NAME" }` or `{ "$file" = "/path" }` and it is resolved when read.
Any setting can also be overridden from the environment as
PREEMPTLENS_<SECTION>__<KEY> (for example PREEMPTLENS_PROMETHEUS__BEARER_TOKEN).
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib
import ipaddress
import logging
import math
import os
import re
import stat
import tomllib
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from preemptlens.contract import FUTURE_SLACK_S, TIERS
from preemptlens.errors import ConfigError, PreemptlensError
from preemptlens.private import exposure, others_can_change
from preemptlens.registry import SECTIONS

log = logging.getLogger(__name__)

ENV_CONFIG = "PREEMPTLENS_CONFIG"
ENV_PREFIX = "PREEMPTLENS_"
DEFAULT_FILE = "preemptlens.toml"


class Secret:
    """A value that must never be printed: its repr and str are masked."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class Setting:
    """One setting as the documentation, validation and environment overrides see it (derived from a field
    of its section's dataclass by `section_of`)."""

    key: str
    default: Any
    help: str
    kind: type = str
    secret: bool = False
    choices: tuple[str, ...] | None = None
    # What else a value must be, beyond its type: returns what was expected, or None when it fits.
    check: Callable[[Any], str | None] | None = None
    # The range of a number, or of each number of a list or table of numbers (None: not a number).
    bounds: tuple[float, float] | None = None
    # The kind of each member of a list or table (`list[float]`, `dict[str, str]`), when it is a simple one.
    member: type | None = None


@dataclass(frozen=True)
class Section:
    name: str
    help: str
    settings: tuple[Setting, ...]


T = TypeVar("T")

_META = "preemptlens.setting"


@dataclass(frozen=True)
class _About:
    help: str
    choices: tuple[str, ...] | None
    check: Callable[[Any], str | None] | None
    bounds: tuple[float, float] | None


def setting(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    check: Callable[[Any], str | None] | None = None,
    bounds: tuple[float, float] | None = None,
) -> Any:
    """A field of a section's dataclass: its default (a table or list is copied for each object) and what
    the documentation says of it. The kind, and whether it is a secret, come from the field's annotation;
    `bounds` is the range (inclusive) of a number, or of each number of a list or table (default: from its
    unit or kind, see UNITS). `choices` of a list are the choices of each member."""
    if bounds is not None and not (len(bounds) == 2 and bounds[0] <= bounds[1]):
        raise TypeError(f"bounds {bounds!r}: expected (low, high) with low <= high")
    about = {_META: _About(help, choices, check, bounds)}
    if isinstance(default, dict | list):
        return field(default_factory=functools.partial(copy.deepcopy, default), metadata=about)
    return field(default=default, metadata=about)


def section(name: str, help: str) -> Callable[[type[T]], type[T]]:
    """Declare a frozen dataclass of `setting()` fields as the settings section `[name]`."""

    def declare(declared: type[T]) -> type[T]:
        params = getattr(declared, "__dataclass_params__", None)
        if not is_dataclass(declared) or params is None or not params.frozen:
            raise TypeError(f"section [{name}]: {declared.__name__} must be a frozen dataclass (@section above it)")
        declared.__section__ = (name, help)  # type: ignore[attr-defined]
        return declared

    return declare


def _kind(hint: Any, where: str) -> tuple[type, bool, type | None]:
    """The type a setting's values must have, whether it is a secret, and the simple kind of each member
    of a list or table (None when its members are of any kind), from its annotation."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"{where}: a setting has one kind (optionally `| None`), not {hint}")
        hint = members[0]
    kind = typing.get_origin(hint) or hint
    if kind is Secret:
        return str, True, None
    if kind not in _KIND_NAMES:
        raise TypeError(f"{where}: a setting's kind is one of {', '.join(k.__name__ for k in _KIND_NAMES)}, "
                        f"not {hint}")
    args = typing.get_args(hint)
    member = args[-1] if kind in (list, dict) and args else None
    return cast(type, kind), False, member if member in (str, int, float, bool) else None


# The range of a number whose declaration gives none, by the unit its name ends with (or holds, for
# `share` and `port`), else by its kind: nothing is unbounded. A negative, zero or huge value where
# the unit does not allow one is refused when the configuration is read, never met in a loop later.
UNITS: tuple[tuple[str, tuple[float, float], str], ...] = (
    ("_gpu_s", (0.0, 1e12), "GPU-seconds"),
    ("_s", (0.0, 31_622_400.0), "seconds"),
    ("_days", (0.0, 3660.0), "days"),
    ("_hours", (0.0, 87_840.0), "hours"),
    ("_weeks", (1.0, 520.0), "weeks"),
    ("share", (0.0, 1.0), "a share"),
    ("port", (1.0, 65_535.0), "a port"),
)
KIND_BOUNDS: dict[type, tuple[float, float]] = {int: (0.0, 1_000_000.0), float: (0.0, 1_000_000.0)}


def _unit(key: str) -> tuple[tuple[float, float], str] | None:
    for ending, bounds, unit in UNITS:
        if key.endswith(ending) or (ending in ("share", "port") and ending in key):
            return bounds, unit
    return None


def _bounds(key: str, kind: type, member: type | None, declared: tuple[float, float] | None) -> (
    tuple[float, float] | None
):
    numeric = kind if kind in (int, float) else member if member in (int, float) else None
    if numeric is None:
        return None
    if declared is not None:
        return (float(declared[0]), float(declared[1]))
    unit = _unit(key)
    return unit[0] if unit else KIND_BOUNDS[numeric]


def range_text(setting: Setting) -> str:
    """`from 10 to 604,800 seconds`: the range of a number setting as the documentation and errors say it."""
    assert setting.bounds is not None
    low, high = setting.bounds
    unit = _unit(setting.key)
    return f"from {_number(low)} to {_number(high)}" + (f" ({unit[1]})" if unit else "")


def number_argument(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], Any]:
    """An argparse `type`: a finite number of `kind` from `low` to `high`, so that a command-line
    number has a range as every setting does (ASCII digits only: int() also reads other scripts')."""

    def parse(text: str) -> int | float:
        value = _convert(kind, text.strip())
        if not _is(kind, value) or (isinstance(value, float) and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {_KIND_NAMES[kind]} from {_number(low)} to "
                                             f"{_number(high)}, got {text[:40]!r}")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is out of range: expected from {_number(low)} to "
                                             f"{_number(high)}")
        return cast(int | float, value)

    return parse


def text_argument(check: Callable[[Any], str | None]) -> Callable[[str], str]:
    """An argparse `type` from a setting's check (http_url, listen_address, duration_text(...))."""

    def parse(text: str) -> str:
        expected = check(text)
        if expected is not None:
            raise argparse.ArgumentTypeError(expected)
        return text

    return parse


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


_DERIVED: dict[type, Section] = {}


def section_of(declared: type) -> Section:
    """The section a dataclass declares, as the records the documentation and validation walk. Its
    annotations are resolved at run time, so the types they name are imported outside TYPE_CHECKING."""
    if declared in _DERIVED:
        return _DERIVED[declared]
    try:
        name, help = declared.__section__  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(f"{declared.__name__} is not a settings section (see preemptlens.config)") from None
    hints = typing.get_type_hints(declared)
    found = []
    for f in fields(declared):
        where = f"{name}.{f.name}"
        about = f.metadata.get(_META)
        if about is None:
            raise TypeError(f"{where}: every field of a section is a setting() with help text")
        kind, secret, member = _kind(hints[f.name], where)
        default = f.default_factory() if callable(f.default_factory) else f.default
        found.append(Setting(f.name, default, about.help, kind, secret, about.choices, about.check,
                             _bounds(f.name, kind, member, about.bounds), member))
    _DERIVED[declared] = Section(name, help, tuple(found))
    return _DERIVED[declared]


def http_url(value: Any) -> str | None:
    """The check of a URL setting: http(s), a host, and a port that is a number when given. What it says
    never quotes the value: a URL may hold a token (a webhook's path, user:password@)."""
    if value in ("", None):
        return None
    text = str(value)
    if len(text) > 8192 or any(ord(c) < 33 or ord(c) == 127 for c in text):
        return "expected a URL of at most 8192 characters, without spaces or control characters"
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError:
        # urlsplit refuses a malformed [IPv6] host; its message quotes the URL.
        return "expected an http:// or https:// URL with a host"
    if parts.scheme not in ("http", "https") or not host:
        return "expected an http:// or https:// URL with a host"
    try:
        parts.port  # noqa: B018 (urlsplit checks the port only when it is read)
    except ValueError:
        return "expected a URL whose port is a number from 0 to 65535"
    return None


def duration_text(low_s: float, high_s: float) -> Callable[[Any], str | None]:
    """The check of a duration written as Prometheus does (`30s`, `1m`, `1h30m`), from `low_s` to `high_s`."""

    def check(value: Any) -> str | None:
        from preemptlens.times import parse_duration_ms

        try:
            seconds = parse_duration_ms(str(value), "") / 1000
        except PreemptlensError:
            return f"expected a duration such as 30s, 5m, 6h or 7d, got {str(value)[:40]!r}"
        if not low_s <= seconds <= high_s:
            return f"{str(value)[:40]!r} is out of range: expected from {_duration(low_s)} to {_duration(high_s)}"
        return None

    return check


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


# A number and a unit, as DuckDB reads them: 64MB, 2.5GB and 2G are powers of 1000, 4GiB of 1024.
_SIZE = re.compile(r"^\s*(\d{1,15}(?:\.\d{1,6})?)\s*([kmgt])(i?)b?\s*$", re.IGNORECASE | re.ASCII)
_SIZE_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str) -> int | None:
    """'64MB', '4GiB', '2G' as bytes; None when it is not a size with its unit."""
    match = _SIZE.match(str(text))
    if not match:
        return None
    base = 1024 if match.group(3) else 1000
    return int(float(match.group(1)) * base ** _SIZE_POWERS[match.group(2).lower()])


def size_text(low: int, high: int) -> Callable[[Any], str | None]:
    """The check of a size written as 64MB or 4GiB, from `low` to `high` bytes."""

    def check(value: Any) -> str | None:
        size = parse_size(str(value))
        if size is None:
            return f"expected a size such as 64MB or 4GiB, got {str(value)[:40]!r}"
        if not low <= size <= high:
            return f"{str(value)[:40]!r} is out of range: expected from {low:,} to {high:,} bytes"
        return None

    return check


def cron_text(value: Any) -> str | None:
    """The check of a crontab line (minute hour day month weekday), as the scheduler reads it."""
    from apscheduler.triggers.cron import CronTrigger

    text = str(value)
    if len(text) > 200 or len(text.split()) != 5:
        return f"expected a crontab line of five fields (minute hour day month weekday), got {text[:60]!r}"
    try:
        trigger = CronTrigger.from_crontab(text, timezone="UTC")
        fires = trigger.get_next_fire_time(None, datetime.now(UTC))
    except (ValueError, TypeError, KeyError, OverflowError):
        return f"{text!r} is not a crontab line (minute hour day month weekday)"
    if fires is None:
        return f"{text!r} never fires"
    return None


def listen_address(value: Any) -> str | None:
    """The check of an address to listen on: an IP address, or localhost."""
    text = str(value)
    if text == "localhost":
        return None
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return f"expected an IP address such as 127.0.0.1, 0.0.0.0 or ::1, got {text[:60]!r}"
    return None


_HOST = re.compile(r"^(?=.{1,253}(?::\d{1,5})?$)[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:\d{1,5})?$", re.ASCII)


def host_name(value: Any) -> str | None:
    """The check of a host name readers type (an optional :port after it); empty is none."""
    text = str(value)
    if text and not (_HOST.match(text) or listen_address(text.strip("[]")) is None):
        return f"expected a host name such as preemptlens.example.org, got {text[:60]!r}"
    return None


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")


def header_name(value: Any) -> str | None:
    """The check of an HTTP header's name (RFC 9110 token)."""
    if not _TOKEN.match(str(value)):
        return f"expected an HTTP header name such as X-Forwarded-User, got {str(value)[:60]!r}"
    return None


def time_zone(value: Any) -> str | None:
    """The check of an IANA time zone name (UTC, Europe/Berlin)."""
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(str(value))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return f"expected a time zone name such as UTC or Europe/Berlin, got {str(value)[:60]!r}"
    return None


# Settings that moved to another section, old name -> new: setting the old name is an error that names the new.
MOVED = {"dashboard.show_other_teams_jobs": "masking.show_other_teams_jobs", "serve.dashboard_port": "dashboard.port"}


@section("warehouse", "Where the DuckDB warehouse lives.")
@dataclass(frozen=True)
class WarehouseSettings:
    path: str = setting("preemptlens.duckdb", "Path of the DuckDB warehouse file.")
    future_slack_s: float = setting(
        FUTURE_SLACK_S,
        "Seconds past the current time that a loaded time may lie (clock skew between hosts); a later "
        "time is quarantined, not taken as the data's end (docs/import-format.md).",
        bounds=(0, 30 * 86_400),
    )


@section("cluster", "The cluster this configuration describes.")
@dataclass(frozen=True)
class ClusterSettings:
    name: str = setting(
        "",
        "Cluster name stored in every row's `cluster` column; empty: the source names it "
        "(Slurm's ClusterName, the `cluster` label the Prometheus selector pins, the kubeconfig context).",
    )
    tiers: dict[str, str] = setting(
        {},
        "Map from the source's priority class (partition, QOS, PriorityClass, "
        "ClusterQueue) to a tier: critical, high, normal or low.",
    )
    default_tier: str = setting("normal", "Tier of a priority class that `tiers` does not name.", choices=TIERS)
    preemptible_tiers: list[str] = setting(
        ["low", "normal"], "Tiers whose jobs may be preempted when the source does not say."
    )

    def tier_of(self, *classes: str | None) -> str:
        """The tier `tiers` gives the first of `classes` it names (a source may know a job by several:
        PriorityClass, then queue), else default_tier."""
        for name in classes:
            if name is not None and name in self.tiers:
                return self.tiers[name]
        return self.default_tier


SETTINGS = (WarehouseSettings, ClusterSettings)


def declared_sections(names: Collection[str] | None = None) -> list[type]:
    """Every section's dataclass (or those named), in documentation order, importing only the modules that
    declare them."""
    found: list[type] = []
    for module_name, declares in SECTIONS.items():
        if names is not None and not any(n in names for n in declares):
            continue
        declared = importlib.import_module(module_name).SETTINGS
        found.extend(declared if isinstance(declared, tuple) else (declared,))
    return found


def sections(names: Collection[str] | None = None) -> list[Section]:
    """Every section (or those named), importing only the modules that declare them."""
    return [section_of(d) for d in declared_sections(names)]


@dataclass
class Config:
    """The settings in force: `values` holds each section's validated values by name (a section or setting
    left out takes its default), and `of` hands out a section as its frozen dataclass."""

    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path | None = None
    _built: dict[type, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def of(self, declared: type[T]) -> T:
        """The section `declared` declares, built on first use; a check across its fields
        (`__post_init__`) raises ConfigError then."""
        if declared not in self._built:
            self._built[declared] = declared(**self.values.get(section_of(declared).name, {}))
        return cast(T, self._built[declared])


REFERENCES = ("$env", "$file")


def is_reference(value: Any) -> bool:
    """A `{ "$env" = ... }` or `{ "$file" = ... }` table, or a table that was meant to be one."""
    return isinstance(value, dict) and any(isinstance(k, str) and k.startswith("$") for k in value)


def resolve_reference(value: Any, where: str, problems: list[str]) -> Any:
    """The value a `$env`/`$file` reference names (problems appended, None returned when it cannot be
    read); any other value unchanged. The one place references are resolved."""
    if not is_reference(value):
        return value
    if len(value) != 1:
        problems.append(f"{where}: expected one of {{ \"$env\" = \"NAME\" }} or {{ \"$file\" = \"/path\" }}, "
                        f"got a table with keys {', '.join(sorted(map(str, value)))}")
        return None
    ((ref, target),) = value.items()
    if ref not in REFERENCES:
        problems.append(f"{where}: unknown reference {ref!r}; expected \"$env\" or \"$file\"")
        return None
    what = "the name of an environment variable" if ref == "$env" else "the path of a file"
    if not isinstance(target, str) or not target.strip() or "\0" in target:
        shown = type(target).__name__ if not isinstance(target, str) else repr(target)
        problems.append(f"{where}: {ref} expects {what} as a non-empty string, got {shown}")
        return None
    if ref == "$env":
        if target not in os.environ:
            problems.append(f"{where}: environment variable {target} is not set")
            return None
        return os.environ[target]
    # A secret another user can change is theirs to choose: where alerts go, which token Prometheus sees.
    changeable = others_can_change(target)
    if changeable:
        problems.append(f"{where}: secret file {target} is not the service's own: {changeable}; chown it to the "
                        f"service's user, chmod 600, in a folder only it (or root) can write")
        return None
    exposed = exposure(Path(target))
    if exposed:
        log.warning("%s: secret file %s is %s; make it readable by the service's user only (chmod 600)",
                    where, target, exposed)
    try:
        return Path(target).read_text().strip()
    except OSError as exc:
        problems.append(f"{where}: cannot read secret file {target}: {exc.strerror or type(exc).__name__}")
    except UnicodeDecodeError:
        problems.append(f"{where}: secret file {target} is not UTF-8 text")
    return None


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# What an operator writes for a number: digits, a point, an exponent (float() also reads 1_000 and other
# scripts' digits); nan and inf are read so that the range check can say they are not finite.
_DECIMAL = re.compile(r"^\s*[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|nan|inf|infinity)\s*$", re.IGNORECASE | re.ASCII)
_INTEGER = re.compile(r"^\s*[+-]?[0-9]{1,30}\s*$")


def _convert(kind: type, value: Any) -> Any:
    """`value` as `kind` where the file or the environment gave it as text (or an int for a float);
    unchanged when it cannot be."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, str) and _INTEGER.match(value):
        # ASCII digits only: int() also reads other scripts' digits, which no operator means.
        return int(value)
    if kind is float and isinstance(value, str) and _DECIMAL.match(value):
        return float(value)
    if kind is bool and isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    return value


def _is(kind: type, value: Any) -> bool:
    return isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))


def _number_problem(setting: Setting, value: Any) -> str | None:
    """Why a number of `setting` is refused (not finite, or out of its range), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    assert setting.bounds is not None
    low, high = setting.bounds
    if not low <= value <= high:
        shown = _number(value) if abs(value) < 1e15 else f"{value:.3g}"
        return f"{shown} is out of range: expected a value {range_text(setting)}"
    return None


def _coerce(setting: Setting, value: Any, where: str, problems: list[str]) -> Any:
    if value is None:
        return None
    value = _convert(setting.kind, value)
    if not _is(setting.kind, value):
        problems.append(f"{where}: expected {_KIND_NAMES.get(setting.kind, setting.kind.__name__)}, "
                        f"got {type(value).__name__}")
        return setting.default
    if setting.kind in (int, float):
        problem = _number_problem(setting, value)
        if problem:
            problems.append(f"{where}: {problem}")
            return setting.default
    if setting.member is not None and isinstance(value, list | dict):
        members = value.items() if isinstance(value, dict) else enumerate(value)
        converted: dict[Any, Any] = {}
        for key, member in members:
            member = _convert(setting.member, member)
            at = f"{where}.{key}" if isinstance(value, dict) else f"{where}[{key}]"
            if not _is(setting.member, member):
                problems.append(f"{at}: expected {_KIND_NAMES[setting.member]}, got {type(member).__name__}")
                return setting.default
            problem = _number_problem(setting, member) if setting.bounds is not None else None
            if problem is None and setting.choices and member not in setting.choices:
                problem = f"{member!r} is not one of {', '.join(setting.choices)}"
            if problem:
                problems.append(f"{at}: {problem}")
                return setting.default
            converted[key] = member
        value = converted if isinstance(value, dict) else list(converted.values())
    elif setting.choices and value not in setting.choices:
        problems.append(f"{where}: {value!r} is not one of {', '.join(setting.choices)}")
        return setting.default
    if setting.check is not None:
        expected = setting.check(value)
        if expected is not None:
            # The value itself may be a secret (a URL with a token): only what was expected is said.
            problems.append(f"{where}: {expected}")
            return setting.default
    return value


_KIND_NAMES = {str: "text", int: "a whole number", float: "a number", bool: "true or false", dict: "a table",
               list: "a list"}


def _refuse_foreign_config(path: Path) -> None:
    """A configuration file someone else can change names the programs preemptlens runs (slurm.bin_dir)
    and where it sends data: refuse it when another user could change it or a folder above it."""
    problem = others_can_change(path) if path.exists() else ""  # a missing file: reading it says so
    if problem:
        raise ConfigError(
            f"config file {path}: {problem}: another user could change what preemptlens runs",
            f"chown it to the service's user and chmod 600 {path}, in a folder only it (or root) can write",
        )
    if path.exists() and path.stat().st_mode & stat.S_IROTH:
        log.warning("config file %s is readable by every user; chmod 600 it (it may name secrets' files)", path)


def config_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    if os.environ.get(ENV_CONFIG):
        return Path(os.environ[ENV_CONFIG])
    default = Path(DEFAULT_FILE)
    return default if default.exists() else None


def load_config(explicit: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read, validate and resolve the configuration; report every problem at once."""
    path = config_path(explicit)
    raw: dict[str, Any] = {}
    if path is not None:
        _refuse_foreign_config(path)
        try:
            raw = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist", f"create it or unset {ENV_CONFIG}") from None
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc.strerror or type(exc).__name__}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    problems: list[str] = []
    # A moved setting still set by its old name in the environment would be ignored silently.
    problems += [f"{ENV_PREFIX}{old.upper().replace('.', '__')}: moved to {ENV_PREFIX}{new.upper().replace('.', '__')}"
                 for old, new in MOVED.items() if f"{ENV_PREFIX}{old.upper().replace('.', '__')}" in os.environ]
    values: dict[str, dict[str, Any]] = {}
    names = {name for declares in SECTIONS.values() for name in declares}
    for name in raw:
        if name not in names:
            problems.append(f"[{name}]: unknown section (known: {', '.join(sorted(names))})")
    # A section set nowhere (file, environment, overrides) holds its defaults: Config.of builds it then, and
    # its module (often heavy to import) is not read here.
    set_somewhere = set(raw) | {"cluster"} | {str(k).split(".", 1)[0] for k in overrides or {}} | {
        key[len(ENV_PREFIX):].split("__", 1)[0].lower() for key in os.environ
        if key.startswith(ENV_PREFIX) and "__" in key}
    known = {s.name: s for s in sections(set_somewhere & names)}
    for section in known.values():
        given = raw.get(section.name, {})
        if not isinstance(given, dict):
            problems.append(f"[{section.name}]: must be a table")
            given = {}
        by_key = {s.key: s for s in section.settings}
        for key in given:
            if key not in by_key:
                moved = MOVED.get(f"{section.name}.{key}")
                problems.append(f"{section.name}.{key}: " + (f"moved to {moved}" if moved else "unknown setting"))
        resolved: dict[str, Any] = {}
        for setting in section.settings:
            where = f"{section.name}.{setting.key}"
            env_name = f"{ENV_PREFIX}{section.name.upper()}__{setting.key.upper()}"
            value = given.get(setting.key, setting.default)
            if env_name in os.environ:
                value = os.environ[env_name]
            if overrides and where in overrides:
                value = overrides[where]
            referenced = is_reference(value) or env_name in os.environ
            value = resolve_reference(value, where, problems)
            before = len(problems)
            value = _coerce(setting, value, where, problems)
            if referenced and len(problems) > before:
                # A value read from the environment or a file may be a secret whatever the setting is:
                # what was expected is said, never what was found.
                problems[before:] = [_QUOTED.sub("(the value given)", p) for p in problems[before:]]
            if setting.secret and value is not None and not isinstance(value, Secret):
                value = Secret(str(value))
            resolved[setting.key] = value
        values[section.name] = resolved
    config = Config(values=values, path=path)
    for klass, tier in config.of(ClusterSettings).tiers.items():
        if tier not in TIERS:
            problems.append(f"cluster.tiers.{klass}: {tier!r} is not one of {', '.join(TIERS)}")
    if not problems:
        # Each section's checks across its fields (`__post_init__`), now rather than at first use; a section set
        # nowhere holds its defaults, which pass them.
        for declared in declared_sections(set_somewhere & names):
            try:
                config.of(declared)
            except (PreemptlensError, ValueError) as exc:
                problems.append(str(exc.message if isinstance(exc, PreemptlensError) else exc))
    if problems:
        where = f" in {path}" if path else ""
        raise ConfigError(
            f"{len(problems)} configuration problem(s){where}:\n  - " + "\n  - ".join(problems),
            "see docs/configuration.md for every setting",
        )
    return config


def render_docs() -> str:
    """docs/configuration.md, generated from the settings registry."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by `python -m preemptlens.config > docs/configuration.md`; a test keeps it current. -->",
        "",
        "preemptlens reads one TOML file: `--config FILE`, else `$PREEMPTLENS_CONFIG`, else",
        "`./preemptlens.toml` when it exists. No file is needed: every setting has a default.",
        "Any setting can be overridden from the environment as `PREEMPTLENS_<SECTION>__<KEY>`",
        "(for example `PREEMPTLENS_WAREHOUSE__PATH`). A secret is best given by reference,",
        '`{ "$env" = "NAME" }` or `{ "$file" = "/run/secrets/name" }`, and is never printed or stored.',
        "",
    ]
    for section in sections():
        lines += [f"## [{section.name}]", "", section.help, "", "| setting | default | meaning |", "|---|---|---|"]
        for s in section.settings:
            default = "(secret, unset)" if s.secret else f"`{s.default!r}`"
            meaning = s.help + (f" One of: {', '.join(s.choices)}." if s.choices else "")
            if s.bounds is not None:
                meaning += f" Range: {range_text(s)}."
            lines.append(f"| `{section.name}.{s.key}` | {default} | {meaning} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    # Run as a script this file is `__main__`, a second copy whose `Secret` the sections do not annotate with.
    from preemptlens import config

    print(config.render_docs(), end="")
