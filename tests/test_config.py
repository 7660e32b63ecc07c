"""Configuration: defaults, file, environment, secrets by reference, documentation."""

from __future__ import annotations

from pathlib import Path

import pytest

from preemptlens.config import Secret, Setting, load_config, render_docs, sections
from preemptlens.errors import ConfigError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_no_file_needed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    config = load_config()
    assert config.path is None
    assert config.get("warehouse.path") == "preemptlens.duckdb"
    assert config.tier_of("anything") == "normal"


def test_file_env_var_and_override_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(
        '[warehouse]\npath = "from-file.duckdb"\n[cluster]\nname = "gpu-east"\ntiers = { prod = "critical" }\n'
    )
    monkeypatch.setenv("PREEMPTLENS_CONFIG", str(path))
    config = load_config()
    assert config.get("cluster.name") == "gpu-east"
    assert config.tier_of("prod") == "critical"
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", "from-env.duckdb")
    assert load_config().get("warehouse.path") == "from-env.duckdb"
    assert load_config(overrides={"warehouse.path": "flag.duckdb"}).get("warehouse.path") == "flag.duckdb"


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


def test_secret_references_resolve_and_never_print(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from preemptlens import config as config_module

    section = config_module.Section(
        "probe",
        "test-only",
        (Setting("token", None, "a secret", secret=True), Setting("file_token", None, "another", secret=True)),
    )
    monkeypatch.setattr(config_module, "SETTINGS", (*config_module.SETTINGS, section))
    secret_file = tmp_path / "token"
    secret_file.write_text("from-file-s3cr3t\n")
    path = tmp_path / "c.toml"
    path.write_text(f'[probe]\ntoken = {{ "$env" = "PROBE_TOKEN" }}\nfile_token = {{ "$file" = "{secret_file}" }}\n')
    monkeypatch.setenv("PROBE_TOKEN", "env-s3cr3t")
    config = load_config(str(path))
    token = config.get("probe.token")
    assert isinstance(token, Secret) and token.reveal() == "env-s3cr3t"
    assert config.get("probe.file_token").reveal() == "from-file-s3cr3t"
    assert "s3cr3t" not in repr(config.values) and "s3cr3t" not in str(config.values)

    monkeypatch.delenv("PROBE_TOKEN")
    with pytest.raises(ConfigError, match="PROBE_TOKEN is not set") as info:
        load_config(str(path))
    assert "s3cr3t" not in str(info.value)


def test_every_setting_is_documented() -> None:
    assert DOCS.read_text() == render_docs(), (
        "docs/configuration.md is stale: python -m preemptlens.config > docs/configuration.md"
    )
    for section in sections():
        for setting in section.settings:
            assert setting.help.strip(), f"{section.name}.{setting.key} has no help text"


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
