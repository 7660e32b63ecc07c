"""dashboards.access without a browser: roles from users and groups, which proxy may vouch for a reader,
what [access] refuses, and how query results are masked for a role."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from preemptlens.config import load_config
from preemptlens.dashboards.access import (
    AccessSettings,
    Reader,
    config_problems,
    email_verified,
    proxy_trusted,
    resolve,
)
from preemptlens.errors import ConfigError
from preemptlens.reading.masking import mask


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


def test_a_login_maps_to_cluster_users_exactly_by_claims_and_domains(tmp_path: Path) -> None:
    a = access(tmp_path, 'email_domains = ["example.org"]\n')
    assert resolve(a, "ana", "ana@example.org", (), "proxy", True).cluster_users == ("ana", "ana@example.org")
    # Another domain's address names only the cluster user spelled as the whole address.
    other = resolve(a, "x", "llm-user8@elsewhere", (), "proxy", True)
    assert "llm-user8" not in other.cluster_users and other.cluster_users == ("x", "llm-user8@elsewhere")
    assert "llm-user8" not in resolve(a, "x", "llm-user8@example.org.evil", (), "proxy", True).cluster_users
    assert resolve(a, "x", "llm-user8@EXAMPLE.ORG", (), "proxy", True).cluster_users[-1] == "llm-user8"
    # The login name is the cluster user only when configured so, and never OpenID Connect's opaque sub.
    quiet = access(tmp_path, "login_is_cluster_user = false\n")
    assert resolve(quiet, "ana", None, (), "proxy", True).cluster_users == ()
    assert resolve(a, "2b1f-sub", None, (), "oidc", True, login_names_user=False).cluster_users == ()
    with pytest.raises(ConfigError, match="email_domains: expected domain names"):
        load_config(overrides={"access.email_domains": ["example org"]})


@pytest.mark.parametrize(("claims", "email"), [
    ({"email": "a@example.org", "email_verified": True}, "a@example.org"),
    ({"email": "a@example.org", "email_verified": "true"}, "a@example.org"),
    ({"email": "a@example.org", "email_verified": False}, None),
    ({"email": "a@example.org"}, None),
    ({"email": "a@example.org", "email_verified": "yes"}, None),
    ({"email": "not-an-address", "email_verified": True}, None),
    ({"email_verified": True}, None),
])
def test_an_oidc_email_counts_only_when_verified(claims: dict[str, object], email: str | None) -> None:
    assert email_verified(claims) == email


def test_own_rows_show_their_victim_side_only(tmp_path: Path) -> None:
    reader = resolve(access(tmp_path, 'users = { me = "team:vision" }\n'), "me", None, (), "proxy", False)
    frame = pl.DataFrame({"victim_job_id": ["mine"], "victim_team": ["nlp"], "victim_user": ["me"],
                          "preemptor_job_id": ["theirs"], "preemptor_team": ["nlp"], "own": [True],
                          "reason": ["Preempted by JobId=theirs_1 (bob) on node-7"]})
    shown = redact(frame, reader).row(0, named=True)
    assert (shown["victim_job_id"], shown["victim_user"]) == ("mine", "me")
    assert shown["preemptor_job_id"] == hidden(1), "their own preemption's preemptor is another team's job"
    assert shown["reason"] == "Preempted by (another team) (bob) on (another team)"


def test_unknown_text_of_another_teams_row_is_masked_and_numbers_tell_jobs_apart(tmp_path: Path) -> None:
    reader = resolve(access(tmp_path, 'users = { me = "team:vision" }\n'), "me", None, (), "proxy", False)
    frame = pl.DataFrame({"holder": ["a", "b", "a", "c"], "team": ["nlp", "nlp", "nlp", "vision"],
                          "new_label": ["x", "y", "x", "z"], "tier": ["low"] * 4, "gpus": [1, 2, 3, 4]})
    shown = redact(frame, reader)
    assert shown["holder"].to_list() == [hidden(1), hidden(2), hidden(1), "c"]
    assert shown["new_label"].to_list() == [hidden(1), hidden(2), hidden(1), "z"], "a column added later"
    assert shown["tier"].to_list() == ["low"] * 4 and shown["gpus"].to_list() == [1, 2, 3, 4]


def test_a_readers_own_team_is_never_masked_and_team_tables_keep_every_name(tmp_path: Path) -> None:
    """The Overview's loss coverage and goodput rows are teams (public), figures summed over jobs: no name is
    masked, the reader's own team's least of all."""
    reader = resolve(access(tmp_path, 'users = { me = "team:vision" }\n'), "me", None, (), "proxy", False)
    frame = pl.DataFrame({"cluster": [None, "c", "c"], "breakdown": [None, "vision", "nlp"],
                          "preemptions": [5, 3, 2], "missing": [None, None, "checkpoints of nlp"]})
    assert redact(frame, reader).equals(frame)
    ledger = pl.DataFrame({"victim_job_id": ["v1", "n1"], "victim_team": ["vision", "nlp"],
                           "victim_user": ["ann", "bob"]})
    assert redact(ledger, reader)["victim_job_id"].to_list() == ["v1", hidden(1)]


def test_a_reason_loses_the_names_its_row_hides(tmp_path: Path) -> None:
    """A scheduler's reason that quotes the hidden preemptor's name or user in plain words loses them too."""
    reader = resolve(access(tmp_path, 'users = { me = "team:vision" }\n'), "me", None, (), "proxy", False)
    frame = pl.DataFrame({"victim_job_id": ["v1"], "victim_team": ["vision"], "preemptor_job_id": ["101"],
                          "preemptor_name": ["serve-prod"], "preemptor_user": ["carol"], "preemptor_team": ["infer"],
                          "reason": ["preempted by job 101 (serve-prod, user carol); serve-production kept"]})
    shown = redact(frame, reader).row(0, named=True)
    assert shown["reason"] == ("preempted by job (another team) ((another team), user (another team)); "
                               "serve-production kept")
    assert shown["victim_job_id"] == "v1"


def test_a_teams_scope_follows_the_one_masking_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A team (a logged-in member, a team's notices) sees everything unless masking.show_other_teams_jobs is off;
    the setting's old name is refused, naming the new one, rather than ignored."""
    from preemptlens.reading.masking import EVERYTHING, Scope, team_scope

    assert team_scope(load_config(None), ("nlp",)) == EVERYTHING
    monkeypatch.setenv("PREEMPTLENS_MASKING__SHOW_OTHER_TEAMS_JOBS", "false")
    assert team_scope(load_config(None), ("nlp", "cv")) == Scope(False, ("cv", "nlp"))
    monkeypatch.delenv("PREEMPTLENS_MASKING__SHOW_OTHER_TEAMS_JOBS")
    old = tmp_path / "old.toml"
    old.write_text("[dashboard]\nshow_other_teams_jobs = false\n")
    with pytest.raises(ConfigError, match=r"dashboard\.show_other_teams_jobs: moved to masking\.show_other_teams_jobs"):
        load_config(str(old))
    monkeypatch.setenv("PREEMPTLENS_DASHBOARD__SHOW_OTHER_TEAMS_JOBS", "false")
    with pytest.raises(ConfigError, match="moved to PREEMPTLENS_MASKING__SHOW_OTHER_TEAMS_JOBS"):
        load_config(None)
