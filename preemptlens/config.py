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
from docs/configuration.md) and optionally `choices` or a `check`. A check
across fields goes in `__post_init__` and raises ConfigError. Code reads a
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

import copy
import functools
import importlib
import math
import os
import tomllib
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from preemptlens.contract import FUTURE_SLACK_S, TIERS
from preemptlens.errors import ConfigError
from preemptlens.registry import SECTIONS

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


def setting(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    check: Callable[[Any], str | None] | None = None,
) -> Any:
    """A field of a section's dataclass: its default (a table or list is copied for each object) and what
    the documentation says of it. The kind, and whether it is a secret, come from the field's annotation."""
    about = {_META: _About(help, choices, check)}
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


def _kind(hint: Any, where: str) -> tuple[type, bool]:
    """The type a setting's values must have, and whether it is a secret, from its annotation."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"{where}: a setting has one kind (optionally `| None`), not {hint}")
        hint = members[0]
    kind = typing.get_origin(hint) or hint
    if kind is Secret:
        return str, True
    if kind not in _KIND_NAMES:
        raise TypeError(f"{where}: a setting's kind is one of {', '.join(k.__name__ for k in _KIND_NAMES)}, "
                        f"not {hint}")
    return cast(type, kind), False


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
        kind, secret = _kind(hints[f.name], where)
        default = f.default_factory() if callable(f.default_factory) else f.default
        found.append(Setting(f.name, default, about.help, kind, secret, about.choices, about.check))
    _DERIVED[declared] = Section(name, help, tuple(found))
    return _DERIVED[declared]


def http_url(value: Any) -> str | None:
    """The check of a URL setting: http(s), a host, and a port that is a number when given."""
    if value in ("", None):
        return None
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected an http:// or https:// URL with a host"
    try:
        parts.port  # noqa: B018 (urlsplit checks the port only when it is read)
    except ValueError:
        return "expected a URL whose port is a number from 0 to 65535"
    return None


@section("warehouse", "Where the DuckDB warehouse lives.")
@dataclass(frozen=True)
class WarehouseSettings:
    path: str = setting("preemptlens.duckdb", "Path of the DuckDB warehouse file.")
    future_slack_s: float = setting(
        FUTURE_SLACK_S,
        "Seconds past the current time that a loaded time may lie (clock skew between hosts); a later "
        "time is quarantined, not taken as the data's end (docs/import-format.md).",
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


def sections(names: Collection[str] | None = None) -> list[Section]:
    """Every section (or those named), importing only the modules that declare them."""
    found: list[Section] = []
    for module_name, declares in SECTIONS.items():
        if names is not None and not any(n in names for n in declares):
            continue
        declared = importlib.import_module(module_name).SETTINGS
        found.extend(section_of(d) for d in (declared if isinstance(declared, tuple) else (declared,)))
    return found


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
    try:
        return Path(target).read_text().strip()
    except OSError as exc:
        problems.append(f"{where}: cannot read secret file {target}: {exc.strerror or type(exc).__name__}")
    except UnicodeDecodeError:
        problems.append(f"{where}: secret file {target} is not UTF-8 text")
    return None


def _coerce(setting: Setting, value: Any, where: str, problems: list[str]) -> Any:
    if value is None:
        return None
    if setting.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if setting.kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if setting.kind is float and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if setting.kind is bool and isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        value = value.lower() in ("true", "1")
    if not isinstance(value, setting.kind) or (setting.kind is int and isinstance(value, bool)):
        problems.append(f"{where}: expected {_KIND_NAMES.get(setting.kind, setting.kind.__name__)}, "
                        f"got {type(value).__name__}")
        return setting.default
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{where}: expected a finite number, got {value!r}")
        return setting.default
    if setting.choices and value not in setting.choices:
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
                problems.append(f"{section.name}.{key}: unknown setting")
        resolved: dict[str, Any] = {}
        for setting in section.settings:
            where = f"{section.name}.{setting.key}"
            env_name = f"{ENV_PREFIX}{section.name.upper()}__{setting.key.upper()}"
            value = given.get(setting.key, setting.default)
            if env_name in os.environ:
                value = os.environ[env_name]
            if overrides and where in overrides:
                value = overrides[where]
            value = resolve_reference(value, where, problems)
            value = _coerce(setting, value, where, problems)
            if setting.secret and value is not None and not isinstance(value, Secret):
                value = Secret(str(value))
            resolved[setting.key] = value
        values[section.name] = resolved
    config = Config(values=values, path=path)
    for klass, tier in config.of(ClusterSettings).tiers.items():
        if tier not in TIERS:
            problems.append(f"cluster.tiers.{klass}: {tier!r} is not one of {', '.join(TIERS)}")
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
            lines.append(f"| `{section.name}.{s.key}` | {default} | {meaning} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    # Run as a script this file is `__main__`, a second copy whose `Secret` the sections do not annotate with.
    from preemptlens import config

    print(config.render_docs(), end="")
