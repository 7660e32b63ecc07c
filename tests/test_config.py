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
