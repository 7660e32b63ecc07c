"""dashboards.access without a browser: roles from users and groups, which proxy may vouch for a reader,
what [access] refuses, and how query results are masked for a role."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from preemptlens.config import load_config
from preemptlens.dashboards.access import AccessSettings, Reader, config_problems, proxy_trusted, resolve
from preemptlens.dashboards.data import mask


def redact(frame: pl.DataFrame, reader: Reader) -> pl.DataFrame:
    return mask(frame, reader.scope)


def hidden(n: int) -> str:
    return f"(another team #{n})"


def access(tmp_path: Path, text: str) -> AccessSettings:
    path = tmp_path / "c.toml"
    path.write_text("[access]\n" + text)
    return load_config(str(path)).of(AccessSettings)


def test_roles_come_from_the_user_first_then_the_strongest_groups(tmp_path: Path) -> None:
    a = access(tmp_path, 'users = { ana = "team:rl" }\n'
                         'groups = { ops = "admin", cv = "team:vision", nlp = "team:nlp" }\n')
    assert resolve(a, "ana", None, ("ops",), "proxy", True).role == "team:rl"
    assert resolve(a, "bo", None, ("cv", "ops"), "proxy", False).admin
    both = resolve(a, "cy", None, ("cv", "nlp"), "proxy", False)
    assert (both.teams, both.others_jobs) == (("vision", "nlp"), False)
    assert resolve(a, "di", "di@example.org", (), "oidc", False).role == "viewer"


def test_access_refuses_what_it_cannot_honour(tmp_path: Path) -> None:
    a = access(tmp_path, 'users = { ana = "root" }\ndefault_role = "admin"\noidc = true\n'
                         'proxy_addresses = ["10.0.0.300"]\n')
    problems = "\n".join(config_problems(a, "0.0.0.0"))
    assert "access.users.ana: 'root' is not a role" in problems
    assert "access.default_role: admin is given by name only" in problems
    assert "access.oidc_client_id: needed when access.oidc is true" in problems
    assert "'10.0.0.300' is not an address" in problems
    assert config_problems(access(tmp_path, ""), "127.0.0.1") == []
    assert "listens on loopback only" in config_problems(access(tmp_path, ""), "10.1.2.3")[0]


def test_only_the_configured_proxies_vouch_for_a_reader_beyond_loopback(tmp_path: Path) -> None:
    a = access(tmp_path, 'proxy_headers = true\nproxy_addresses = ["10.0.0.0/24"]\n')
    assert proxy_trusted(a, "127.0.0.1", "192.0.2.9"), "on loopback only a local proxy can connect"
    assert proxy_trusted(a, "0.0.0.0", "10.0.0.7")
    assert not proxy_trusted(a, "0.0.0.0", "10.0.1.7")
    assert not proxy_trusted(a, "0.0.0.0", None), "a local process is not a configured proxy"


LEDGER = pl.DataFrame({
    "victim_job_id": ["1", "2", "3"], "victim_team": ["vision", "nlp", "nlp"], "victim_user": ["v", "n", "me"],
    "preemptor_job_id": ["9", "8", None], "preemptor_team": ["nlp", "vision", None],
    "lost_gpu_hours": [1.0, 2.0, 3.0], "own": [False, False, True],
})


def test_other_teams_jobs_are_masked_and_figures_kept(tmp_path: Path) -> None:
    reader = resolve(access(tmp_path, 'users = { me = "team:vision" }\n'), "me", None, (), "proxy", False)
    shown = redact(LEDGER, reader)
    assert shown["victim_job_id"].to_list() == ["1", hidden(1), "3"], "the reader's own job shows whatever its team"
    assert shown["victim_user"].to_list() == ["v", hidden(1), "me"]
    assert shown["preemptor_job_id"].to_list() == [hidden(1), "8", None]
    assert shown["lost_gpu_hours"].to_list() == [1.0, 2.0, 3.0]
    assert redact(LEDGER, resolve(access(tmp_path, ""), "x", None, (), "proxy", True)).equals(LEDGER)


@pytest.mark.parametrize("column", ["job_id", "hosts", "victim_job_id", "user_name"])
def test_an_identifier_without_its_team_column_is_masked_whole(tmp_path: Path, column: str) -> None:
    reader = resolve(access(tmp_path, 'users = { me = "team:vision" }\n'), "me", None, (), "proxy", False)
    frame = pl.DataFrame({column: ["a", "b"], "gpus": [8, 4]})
    assert redact(frame, reader)[column].to_list() == [hidden(1), hidden(2)]


def test_a_cheaper_victim_of_another_team_is_masked(tmp_path: Path) -> None:
    reader = resolve(access(tmp_path, 'users = { me = "team:vision" }\n'), "me", None, (), "proxy", False)
    frame = pl.DataFrame({"cheaper_job_id": ["7", "8", None], "cheaper_team": ["vision", "nlp", None],
                          "cheaper_cost_gpu_s": [1.0, 2.0, None]})
    assert redact(frame, reader)["cheaper_job_id"].to_list() == ["7", hidden(1), None]
