"""Configuration: defaults, file, environment, secrets by reference, documentation."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from preemptlens.config import (
    ClusterSettings,
    Config,
    Secret,
    WarehouseSettings,
    load_config,
    render_docs,
    section,
    section_of,
    sections,
    setting,
)
from preemptlens.errors import ConfigError
from preemptlens.registry import SECTIONS

DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_no_file_needed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    config = load_config()
    assert config.path is None
    assert config.of(WarehouseSettings).path == "preemptlens.duckdb"
    assert config.of(ClusterSettings).tier_of("anything") == "normal"


def test_file_env_var_and_override_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(
        '[warehouse]\npath = "from-file.duckdb"\n[cluster]\nname = "gpu-east"\ntiers = { prod = "critical" }\n'
    )
    monkeypatch.setenv("PREEMPTLENS_CONFIG", str(path))
    config = load_config()
    assert config.of(ClusterSettings).name == "gpu-east"
    assert config.of(ClusterSettings).tier_of("prod") == "critical"
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", "from-env.duckdb")
    assert load_config().of(WarehouseSettings).path == "from-env.duckdb"
    assert load_config(overrides={"warehouse.path": "flag.duckdb"}).of(WarehouseSettings).path == "flag.duckdb"


def test_every_problem_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[warehouse]\npathh = "x"\n[clusterr]\nname = 1\n[cluster]\ndefault_tier = "urgent"\ntiers = { a = "vip" }\n'
    )
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    text = str(info.value)
    for fragment in (
        "warehouse.pathh: unknown setting",
        "[clusterr]: unknown section",
        "cluster.default_tier: 'urgent'",
        "cluster.tiers.a: 'vip'",
    ):
        assert fragment in text
    assert str(path) in text


@section("probe", "test-only")
@dataclass(frozen=True)
class ProbeSettings:
    token: Secret | None = setting(None, "a secret")
    file_token: Secret | None = setting(None, "another")


def test_secret_references_resolve_and_never_print(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from preemptlens import config as config_module

    monkeypatch.setattr(config_module, "SETTINGS", (*config_module.SETTINGS, ProbeSettings))
    monkeypatch.setitem(config_module.SECTIONS, "preemptlens.config", ("warehouse", "cluster", "probe"))
    secret_file = tmp_path / "token"
    secret_file.write_text("from-file-s3cr3t\n")
    path = tmp_path / "c.toml"
    path.write_text(f'[probe]\ntoken = {{ "$env" = "PROBE_TOKEN" }}\nfile_token = {{ "$file" = "{secret_file}" }}\n')
    monkeypatch.setenv("PROBE_TOKEN", "env-s3cr3t")
    config = load_config(str(path))
    probe = config.of(ProbeSettings)
    assert isinstance(probe.token, Secret) and probe.token.reveal() == "env-s3cr3t"
    assert isinstance(probe.file_token, Secret) and probe.file_token.reveal() == "from-file-s3cr3t"
    assert "s3cr3t" not in repr(config.values) and "s3cr3t" not in str(config.values)
    assert "s3cr3t" not in repr(probe) and "s3cr3t" not in repr(config)

    monkeypatch.delenv("PROBE_TOKEN")
    with pytest.raises(ConfigError, match="PROBE_TOKEN is not set") as info:
        load_config(str(path))
    assert "s3cr3t" not in str(info.value)


def test_every_setting_is_documented() -> None:
    assert DOCS.read_text() == render_docs(), (
        "docs/configuration.md is stale: python -m preemptlens.config > docs/configuration.md"
    )
    for declared in sections():
        for one in declared.settings:
            assert one.help.strip(), f"{declared.name}.{one.key} has no help text"


def test_the_registry_names_the_sections_each_module_declares() -> None:
    for module_name, names in SECTIONS.items():
        declared = importlib.import_module(module_name).SETTINGS
        assert tuple(section_of(d).name for d in (declared if isinstance(declared, tuple) else (declared,))) == \
            names, module_name


# Loads a configuration in a fresh interpreter and prints which section modules that imported.
LOADER = """
import json, sys
from preemptlens.config import load_config
from preemptlens.errors import ConfigError
from preemptlens.registry import SECTIONS
try:
    load_config(sys.argv[1] or None)
    outcome = "ok"
except ConfigError as exc:
    outcome = exc.message
print(json.dumps([outcome, sorted(m for m in SECTIONS if m in sys.modules)]))
"""


def _load_in_fresh_interpreter(path: str, **env: str) -> tuple[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", LOADER, path], capture_output=True, text=True, check=True,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}, **env})
    outcome, modules = json.loads(done.stdout)
    return outcome, modules


def test_only_the_sections_a_configuration_sets_are_imported_and_each_is_checked(tmp_path: Path) -> None:
    assert _load_in_fresh_interpreter("") == ("ok", ["preemptlens.config"])
    path = tmp_path / "c.toml"
    path.write_text('[prometheus]\nurl = "ftp://nowhere"\n[sql]\nmax_rows = 5\n')
    outcome, modules = _load_in_fresh_interpreter(str(path))
    assert "prometheus.url" in outcome, "a section set in the file is still checked when read"
    assert modules == ["preemptlens.collectors.prometheus", "preemptlens.config", "preemptlens.readonly"]
    # A section set through the environment is checked too.
    outcome, modules = _load_in_fresh_interpreter("", PREEMPTLENS_LIVE_COST__KEEP_DAYS="many")
    assert "live_cost.keep_days" in outcome and "preemptlens.analytics.livecost" in modules


BROKEN_REFERENCES = [
    ('bearer_token = { "$env" = 123 }', "prometheus.bearer_token: $env expects the name of an environment variable "
                                        "as a non-empty string, got int"),
    ('bearer_token = { "$env" = "" }', "prometheus.bearer_token: $env expects"),
    ('bearer_token = { "$env" = ["A"] }', "got list"),
    ('bearer_token = { "$file" = 7 }', "prometheus.bearer_token: $file expects the path of a file"),
    ('bearer_token = { "$file" = { "$env" = "X" } }', "got dict"),
    ('bearer_token = { "$envv" = "X" }', "prometheus.bearer_token: unknown reference '$envv'"),
    ('bearer_token = { "$env" = "A", "$file" = "/b" }', "expected one of"),
    ('bearer_token = { "$file" = "/nonexistent/secret" }', "cannot read secret file /nonexistent/secret"),
    ('password = { "$env" = "PREEMPTLENS_TEST_UNSET_VARIABLE" }', "environment variable PREEMPTLENS_TEST_UNSET_"),
    ('url = "http://localhost:abc"', "prometheus.url: expected a URL whose port is a number"),
    ('url = "http://localhost:99999"', "prometheus.url: expected a URL whose port is a number"),
    ('url = "localhost:9090"', "prometheus.url: expected an http:// or https:// URL with a host"),
    ("url = 9090", "prometheus.url: expected text, got int"),
    ("bearer_token = { \"$file\" = \"{secret}\" }", "is not UTF-8 text"),
    ('page_points = "lots"', "prometheus.page_points: expected a whole number, got str"),
]


def test_every_broken_reference_and_url_is_one_problem_in_the_list(tmp_path: Path) -> None:
    """All at once, each with its setting and what was expected; no traceback, no secret."""
    secret = tmp_path / "not-utf8"
    secret.write_bytes(b"\xff\xfe")
    lines = [line for line, _ in BROKEN_REFERENCES]
    # One TOML table cannot set a key twice: each case goes into a table of its own, checked apart,
    # and then all the distinct keys together.
    for line, expected in BROKEN_REFERENCES:
        path = tmp_path / "c.toml"
        path.write_text(f"[prometheus]\n{line.replace('{secret}', str(secret))}\n")
        with pytest.raises(ConfigError) as caught:
            load_config(str(path))
        assert expected in str(caught.value), (line, str(caught.value))
        assert "Traceback" not in str(caught.value)
    path = tmp_path / "all.toml"
    path.write_text(
        '[prometheus]\nbearer_token = { "$env" = 123 }\nurl = "http://h:port"\n'
        f'[alerts]\nsigning_key = {{ "$file" = "{secret}" }}\nwebhook_url = "file:///etc/passwd"\n'
        'team_webhooks = { nlp = "https://hooks/t0ken", ops = { "$env" = 5 } }\n'
        "[sql]\ntimeout_s = nan\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    text = str(caught.value)
    assert text.startswith("6 configuration problem(s)")  # the two team webhooks share one line
    for where in ("prometheus.bearer_token:", "prometheus.url:", "alerts.signing_key: secret file",
                  "alerts.webhook_url: expected an http", "alerts.team_webhooks: nlp: a webhook URL must be given",
                  "ops: $env expects", "sql.timeout_s: expected a finite number"):
        assert where in text, where
    assert "t0ken" not in text and "passwd" not in text
    assert len(lines) == len(set(lines))


def test_unreadable_config_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(str(tmp_path))
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"\xff\xfe[x]")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_config(str(binary))


@section("typed", "test-only: one setting of every kind")
@dataclass(frozen=True)
class TypedSettings:
    ratio: float = setting(0.5, "a number")
    count: int = setting(3, "a whole number")
    flag: bool = setting(True, "true or false")
    mode: str = setting("a", "one of two", choices=("a", "b"))
    table: dict[str, Any] = setting({"k": [1]}, "a table")
    items: list[str] = setting(["x"], "a list")
    user: str | None = setting(None, "text or unset")
    key: Secret | None = setting(None, "a secret")


def test_a_section_is_derived_from_its_dataclass() -> None:
    """The records docs, validation and the environment use come from the annotations and setting()."""
    derived = {s.key: (s.kind, s.secret, s.default, s.choices) for s in section_of(TypedSettings).settings}
    assert derived == {
        "ratio": (float, False, 0.5, None),
        "count": (int, False, 3, None),
        "flag": (bool, False, True, None),
        "mode": (str, False, "a", ("a", "b")),
        "table": (dict, False, {"k": [1]}, None),
        "items": (list, False, ["x"], None),
        "user": (str, False, None, None),
        "key": (str, True, None, None),
    }
    assert section_of(TypedSettings).name == "typed"
    # A mutable default is the object's own: changing one object's table leaves the next one's alone.
    TypedSettings().table["k"].append(2)
    assert TypedSettings().table == {"k": [1]}


def test_values_from_the_environment_are_converted_to_the_annotated_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from preemptlens import config as config_module

    monkeypatch.setattr(config_module, "SETTINGS", (*config_module.SETTINGS, TypedSettings))
    monkeypatch.setenv("PREEMPTLENS_TYPED__RATIO", "0.25")
    monkeypatch.setenv("PREEMPTLENS_TYPED__COUNT", "7")
    monkeypatch.setenv("PREEMPTLENS_TYPED__FLAG", "false")
    monkeypatch.setenv("PREEMPTLENS_TYPED__KEY", "k3y")
    typed = load_config(overrides={"typed.mode": "b"}).of(TypedSettings)
    assert (typed.ratio, typed.count, typed.flag, typed.mode) == (0.25, 7, False, "b")
    assert typed.key == Secret("k3y")


def test_a_section_object_is_built_once_frozen_and_defaults_what_is_left_out() -> None:
    config = Config(values={"warehouse": {"path": "w.duckdb"}})
    built = config.of(WarehouseSettings)
    assert config.of(WarehouseSettings) is built
    assert (built.path, built.future_slack_s) == ("w.duckdb", WarehouseSettings().future_slack_s)
    with pytest.raises(AttributeError):
        built.path = "other.duckdb"  # type: ignore[misc]
    assert Config().of(ClusterSettings) == ClusterSettings()


def test_a_section_must_be_a_frozen_dataclass_of_settings() -> None:
    with pytest.raises(TypeError, match="frozen dataclass"):

        @section("loose", "not frozen")
        @dataclass
        class Loose:
            value: int = setting(1, "a number")

    @section("bare", "a field without help")
    @dataclass(frozen=True)
    class Bare:
        value: int = 1

    with pytest.raises(TypeError, match=r"bare\.value: every field of a section is a setting"):
        section_of(Bare)


def test_serve_runs_the_dashboard_on_its_one_port(tmp_path: Path) -> None:
    """`preemptlens serve` and `preemptlens dashboard` serve one dashboard: a port set for one is the other's, and
    the old second key names where it went instead of being ignored."""
    from preemptlens.commands.serve import Server

    path = tmp_path / "site.toml"
    path.write_text(f'[warehouse]\npath = "{tmp_path / "w.duckdb"}"\n[serve]\njobs = ["dashboard"]\n'
                    "[dashboard]\nport = 8611\n")
    served = Server(load_config(str(path)))
    assert served.dashboard_options is not None and "8611" in served.dashboard_options
    old = tmp_path / "old.toml"
    old.write_text("[serve]\ndashboard_port = 8611\n")
    with pytest.raises(ConfigError, match=r"serve\.dashboard_port: moved to dashboard\.port"):
        load_config(str(old))
