"""Configuration: one TOML file, documented settings, secrets by reference.

Where the file is: `--config`, else $PREEMPTLENS_CONFIG, else ./preemptlens.toml
when it exists; no file at all is fine (every setting has a default).

Each module that needs settings declares a `Section` named after its TOML
table and is listed in `preemptlens.registry.SECTIONS`; every setting carries help text, and
a test fails when one is missing from docs/configuration.md.

A secret is never written into the file in clear if it can be helped: give
`{ "$env" = "NAME" }` or `{ "$file" = "/path" }` and it is resolved when read.
Any setting can also be overridden from the environment as
PREEMPTLENS_<SECTION>__<KEY> (for example PREEMPTLENS_PROMETHEUS__BEARER_TOKEN).
"""

from __future__ import annotations

import importlib
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
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
    key: str
    default: Any
    help: str
    kind: type = str
    secret: bool = False
    choices: tuple[str, ...] | None = None
    # What else a value must be, beyond its type: returns what was expected, or None when it fits.
    check: Callable[[Any], str | None] | None = None


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


@dataclass(frozen=True)
class Section:
    name: str
    help: str
    settings: tuple[Setting, ...]


SETTINGS = (
    Section(
        "warehouse",
        "Where the DuckDB warehouse lives.",
        (
            Setting("path", "preemptlens.duckdb", "Path of the DuckDB warehouse file."),
            Setting(
                "future_slack_s",
                FUTURE_SLACK_S,
                "Seconds past the current time that a loaded time may lie (clock skew between hosts); a later "
                "time is quarantined, not taken as the data's end (docs/import-format.md).",
                kind=float,
            ),
        ),
    ),
    Section(
        "cluster",
        "The cluster this configuration describes.",
        (
            Setting(
                "name",
                "",
                "Cluster name stored in every row's `cluster` column; empty: the source names it "
                "(Slurm's ClusterName, the `cluster` label the Prometheus selector pins, the kubeconfig context).",
            ),
            Setting(
                "tiers",
                {},
                "Map from the source's priority class (partition, QOS, PriorityClass, "
                "ClusterQueue) to a tier: critical, high, normal or low.",
                kind=dict,
            ),
            Setting(
                "default_tier",
                "normal",
                "Tier of a priority class that `tiers` does not name.",
                choices=TIERS,
            ),
            Setting(
                "preemptible_tiers",
                ["low", "normal"],
                "Tiers whose jobs may be preempted when the source does not say.",
                kind=list,
            ),
        ),
    ),
)


def sections() -> list[Section]:
    found: list[Section] = []
    for module_name in SECTIONS:
        declared = importlib.import_module(module_name).SETTINGS
        found.extend(declared if isinstance(declared, tuple) else (declared,))
    return found


@dataclass
class Config:
    values: dict[str, dict[str, Any]]
    path: Path | None = None
    problems: list[str] = field(default_factory=list)

    def get(self, dotted: str) -> Any:
        section, _, key = dotted.partition(".")
        try:
            return self.values[section][key]
        except KeyError:
            raise ConfigError(f"no setting {dotted!r}", "see docs/configuration.md") from None

    def section(self, name: str) -> dict[str, Any]:
        return dict(self.values.get(name, {}))

    def tier_of(self, priority_class: str | None) -> str:
        tiers: Mapping[str, str] = self.get("cluster.tiers")
        if priority_class is not None and priority_class in tiers:
            return tiers[priority_class]
        return str(self.get("cluster.default_tier"))


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
    known = {s.name: s for s in sections()}
    for name in raw:
        if name not in known:
            problems.append(f"[{name}]: unknown section (known: {', '.join(sorted(known))})")
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
    for klass, tier in values["cluster"]["tiers"].items():
        if tier not in TIERS:
            problems.append(f"cluster.tiers.{klass}: {tier!r} is not one of {', '.join(TIERS)}")
    if problems:
        where = f" in {path}" if path else ""
        raise ConfigError(
            f"{len(problems)} configuration problem(s){where}:\n  - " + "\n  - ".join(problems),
            "see docs/configuration.md for every setting",
        )
    return Config(values=values, path=path)


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
    print(render_docs(), end="")
