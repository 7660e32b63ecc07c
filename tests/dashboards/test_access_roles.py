"""Logged in behind a real nginx (basic authentication, user and groups passed on in X-Forwarded-* headers),
each role sees what docs/deploy.md promises, in headless Chromium: the hand-made cluster's jobs of other
teams are masked for a team and a viewer (dashboard.show_other_teams_jobs = false), only admins get the
Operations and SQL pages, and a logged-in reader lands on their own preemptions."""

from __future__ import annotations

import base64
import os
import re
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import fixture_cluster
import pytest
from browser import Chromium, Dashboard, PageState, free_port
from nginx import Nginx

from preemptlens.dashboards.data import HIDDEN

PASSWORD = "correct horse"
# nginx users and their groups; the dashboard's [access] gives roles to some names and groups.
USERS = {"vision-user": "", "nlp-user": "nlp,staff", "ops": "platform", "guest": "staff"}
CONFIG = """
[dashboard]
show_other_teams_jobs = false
[access]
proxy_headers = true
proxy_secret = { "$file" = "SECRET_FILE" }
users = { "vision-user" = "team:vision" }
groups = { platform = "admin", nlp = "team:nlp" }
"""
NAV = """
JSON.stringify(Array.from(document.querySelectorAll('[data-testid="stSidebarNavLink"]'))
    .map(e => e.innerText.trim().split('\\n').pop().trim()))
"""


@pytest.fixture(scope="module")
def proxied(cluster_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Nginx, Chromium]]:
    root = tmp_path_factory.mktemp("roles")
    secret = secrets.token_urlsafe(24)
    (root / "proxy-secret").write_text(secret)
    config = root / "preemptlens.toml"
    config.write_text(CONFIG.replace("SECRET_FILE", str(root / "proxy-secret")))
    program = (sys.executable, "-m", "preemptlens.cli", "--config", str(config))
    with (
        Dashboard(cluster_warehouse, root / "streamlit.log", program=program) as dashboard,
        Nginx(root / "nginx", dashboard.port, dict.fromkeys(USERS, PASSWORD),
              {u: g for u, g in USERS.items() if g}, secret) as nginx,
        Chromium() as browser,
    ):
        yield nginx, browser


def open_as(proxied: tuple[Nginx, Chromium], user: str, path: str = "", title: str | None = None) -> PageState:
    """A new tab logged in to nginx as `user` (basic authentication on every request, the WebSocket's too)."""
    nginx, browser = proxied
    browser.fresh_tab()
    token = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    browser.call("Network.enable")
    browser.call("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    browser.navigate(f"{nginx.url}/{path}")
    state, seconds = browser.wait_rendered(timeout_s=120, title=title)
    assert state.rendered and not state.exceptions, f"{user} /{path}: not rendered in {seconds:.1f} s: {state.text}"
    return state


def nav(browser: Chromium) -> list[str]:
    import json

    return list(json.loads(browser.call("Runtime.evaluate", {"expression": NAV, "returnByValue": True})["result"]
                           ["value"]))


def vision_truth(warehouse: Path) -> tuple[int, float, float]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        row = con.execute(
            "SELECT count(*), sum(lost_gpu_s + warmup_gpu_s) / 3600, sum(requeue_gpu_s) / 3600 "
            "FROM preemption_ledger WHERE victim_user = 'vision-user'"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0]), float(row[1]), float(row[2])


def test_a_team_member_lands_on_their_own_preemptions(proxied: tuple[Nginx, Chromium], cluster_warehouse: Path) -> None:
    state = open_as(proxied, "vision-user", title="My preemptions")
    count, thrown, waiting = vision_truth(cluster_warehouse)
    # The fixture's vision victims: train-w0..w2 and train-48b, 4 + 4 + 4 + 8 GPU-hours of lost progress.
    assert count == 4 and thrown == pytest.approx(20.0)
    shown = dict(re.findall(r"(Your preemptions|Your team's|Work thrown away|Waiting)\s*\n+\s*([\d,.]+)", state.text))
    assert shown == {"Your preemptions": "4", "Your team's": "0", "Work thrown away": f"{thrown:,.1f}",
                     "Waiting": f"{waiting:,.1f}"}
    assert re.match(r"My preemptions\s+vision-user \(vision\) ·", state.text), state.text[:200]
    # Their own preemptions, but the preemptors are infer's jobs: masked (dashboard.show_other_teams_jobs).
    assert "**" not in state.text and "preempted by (another team #1)" in state.text.replace("\n", " ")
    assert "serve-w" not in state.text
    assert "What would have protected it" in state.text


def test_a_team_sees_cluster_figures_but_not_other_teams_jobs(proxied: tuple[Nginx, Chromium]) -> None:
    state = open_as(proxied, "vision-user", "preemptions", title="Preemptions")
    browser = proxied[1]
    # the pilot's evaluation is cluster-level, public like the rules and reasons
    assert nav(browser) == ["My preemptions", "Overview", "Preemptions", "Idle hoarding", "Priority scope creep",
                            "Tuning", "Pilot"]
    # All five preemptions are counted; nlp's finetune-48 and its preemptor batch-48 are not named.
    assert re.search(r"Preemptions\s*\n+\s*5\b", state.text)
    assert fixture_cluster.WORST_W48 not in state.text and fixture_cluster.WORST_W48_PREEMPTOR not in state.text
    assert "train-48b" in state.text
    hoarding = open_as(proxied, "vision-user", "hoarding", title="Idle hoarding")
    assert fixture_cluster.HOARDER_JOB not in hoarding.text


def test_admin_only_pages_are_not_served_to_a_team(proxied: tuple[Nginx, Chromium]) -> None:
    for path in ("sql", "operations"):
        state = open_as(proxied, "nlp-user", path)
        assert state.title == "My preemptions", f"/{path} served {state.title} to a team member"
    assert "SQL" not in nav(proxied[1]) and "Operations" not in nav(proxied[1])


def test_a_viewer_sees_no_jobs_of_any_team(proxied: tuple[Nginx, Chromium]) -> None:
    state = open_as(proxied, "guest", "preemptions", title="Preemptions")
    assert re.search(r"Preemptions\s*\n+\s*5\b", state.text)
    for job in ("train-48b", "train-w0", fixture_cluster.WORST_W48):
        assert job not in state.text
    assert "No victims in this window." in state.text


def test_an_admin_by_group_gets_sql_operations_and_every_job(proxied: tuple[Nginx, Chromium]) -> None:
    state = open_as(proxied, "ops", "preemptions", title="Preemptions")
    assert fixture_cluster.WORST_W48 in state.text and HIDDEN[:-1] not in state.text
    assert {"Operations", "SQL"} <= set(nav(proxied[1]))
    assert open_as(proxied, "ops", "operations", title="Operations").title == "Operations"


def test_a_forged_identity_header_does_not_get_past_nginx(proxied: tuple[Nginx, Chromium]) -> None:
    nginx, browser = proxied
    browser.fresh_tab()
    token = base64.b64encode(f"guest:{PASSWORD}".encode()).decode()
    browser.call("Network.enable")
    browser.call("Network.setExtraHTTPHeaders", {"headers": {
        "Authorization": f"Basic {token}", "X-Forwarded-User": "ops", "X-Forwarded-Groups": "platform"}})
    browser.navigate(f"{nginx.url}/sql")
    state, _ = browser.wait_rendered(timeout_s=120, title="My preemptions")
    assert state.title == "My preemptions" and "SQL" not in nav(browser)


def test_a_local_client_going_around_nginx_is_not_believed(proxied: tuple[Nginx, Chromium]) -> None:
    """Another user of the same host connects to the dashboard's loopback port directly, naming an admin."""
    nginx, browser = proxied
    browser.fresh_tab()
    browser.call("Network.enable")
    browser.call("Network.setExtraHTTPHeaders", {"headers": {
        "X-Forwarded-User": "ops", "X-Forwarded-Groups": "platform", "X-Preemptlens-Proxy-Secret": "guess"}})
    browser.navigate(f"{nginx.upstream}/sql")
    state, _ = browser.wait_rendered(timeout_s=120)
    assert state.errors == ["This connection does not come through the configured auth proxy "
                            "(access.proxy_secret)."], state.text
    assert "SQL" not in nav(browser)


class OnAddress(Dashboard):
    """`preemptlens dashboard` listening on `address` (dashboard.address in the configuration), reached
    through 127.0.0.1."""

    def __init__(self, address: str, program: tuple[str, ...], warehouse: Path, log: Path) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
        self.serve([*program, "--warehouse", str(warehouse), "dashboard", "--address", address,
                    "--port", str(self.port)], log, env)


def test_beyond_loopback_only_a_configured_proxy_vouches_for_a_reader(
    cluster_warehouse: Path, tmp_path: Path
) -> None:
    """The dashboard listening beyond loopback (every interface): a client that is not in access.proxy_addresses
    sending the identity headers (and a forged X-Forwarded-For naming the proxy) is refused; once its address is
    listed, it is believed. Only loopback traffic: the client is 127.0.0.1, the other "proxy" 127.0.0.2."""
    address = "0.0.0.0"
    config = tmp_path / "preemptlens.toml"
    settings = (f'[dashboard]\naddress = "{address}"\npublic_host = "127.0.0.1"\n'
                '[access]\nproxy_headers = true\ngroups = { platform = "admin" }\nproxy_addresses = ["{proxy}"]\n')
    config.write_text(settings.replace("{proxy}", "127.0.0.2"))
    program = (sys.executable, "-m", "preemptlens.cli", "--config", str(config))
    headers = {"X-Forwarded-User": "ops", "X-Forwarded-Groups": "platform", "X-Forwarded-For": "127.0.0.2"}
    with OnAddress(address, program, cluster_warehouse, tmp_path / "streamlit.log") as dashboard, \
            Chromium() as browser:
        browser.call("Network.enable")
        browser.call("Network.setExtraHTTPHeaders", {"headers": headers})
        browser.navigate(dashboard.url)
        state, _ = browser.wait_rendered(timeout_s=120)
        assert state.errors == ["This connection does not come through the configured auth proxy "
                                "(access.proxy_addresses)."], state.text
        # The dashboard reads its configuration on every run: this host is the proxy now.
        config.write_text(settings.replace("{proxy}", "127.0.0.1"))
        browser.fresh_tab()
        browser.call("Network.enable")
        browser.call("Network.setExtraHTTPHeaders", {"headers": headers})
        browser.navigate(f"{dashboard.url}/operations")
        state, _ = browser.wait_rendered(timeout_s=120, title="Operations")
        assert state.title == "Operations" and not state.errors
