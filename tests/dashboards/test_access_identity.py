"""Who a login is, against the real OpenID Connect provider (django-oidc-provider) in headless Chromium: a
verified email of a configured domain maps to its cluster user and role; the same local part at another domain
(llm-user8@elsewhere.org) is not that user; an unverified email maps to nothing, not even the role access.users
gives the address."""

from __future__ import annotations

import re
import secrets
import sys
from collections.abc import Iterator

import hostile_cluster as hc
import pytest
from browser import Chromium, Dashboard, free_port
from oidc import Provider
from test_access_oidc import PASSWORD, click_button, js, provider_login

# name -> groups=email=whether the provider verified it (tests/dashboards/oidc.py)
USERS = {
    "real": f"={hc.LLM_USER}@example.org=yes",
    "mallory": f"={hc.LLM_USER}@elsewhere.org=yes",
    "eve": f"={hc.LLM_USER}@example.org=no",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Provider, Dashboard]]:
    root = tmp_path_factory.mktemp("identity")
    warehouse = hc.build(root / "w.duckdb", "http://127.0.0.1:9")
    port = free_port()
    redirect = f"http://127.0.0.1:{port}/oauth2callback"
    with Provider(root / "provider", USERS, PASSWORD, redirect) as provider:
        cookie = root / "cookie-secret"
        cookie.write_text(secrets.token_urlsafe(32))
        cookie.chmod(0o600)
        config = root / "preemptlens.toml"
        config.write_text(
            "[masking]\nshow_other_teams_jobs = false\n"
            "[access]\noidc = true\n"
            f'oidc_metadata_url = "{provider.metadata_url}"\noidc_client_id = "{provider.client_id}"\n'
            'oidc_client_secret = { "$env" = "TEST_OIDC_CLIENT_SECRET" }\n'
            f'oidc_cookie_secret = {{ "$file" = "{cookie}" }}\n'
            f'oidc_redirect_uri = "{redirect}"\noidc_prompt = "login"\n'
            # The login names are the provider's own, none a cluster user: only a verified address maps.
            'login_is_cluster_user = false\nemail_domains = ["example.org"]\n'
            f'users = {{ "{hc.LLM_USER}@example.org" = "team:llm" }}\n'
        )
        config.chmod(0o600)
        env = {"PATH": "/usr/bin:/bin", "TEST_OIDC_CLIENT_SECRET": provider.client_secret}
        program = (sys.executable, "-m", "preemptlens.cli", "--config", str(config))
        with Dashboard(warehouse, root / "streamlit.log", port=port, program=program, env=env) as dashboard:
            yield provider, dashboard


def logged_in_as(site: tuple[Provider, Dashboard], user: str) -> tuple[str, str]:
    """My preemptions' text and the sidebar's, for `user` logged in through the provider."""
    _, dashboard = site
    with Chromium() as browser:
        browser.navigate(dashboard.url)
        browser.wait_rendered(timeout_s=120, title="preemptlens")
        click_button(browser, "Log in")
        provider_login(browser, user)
        # A team member lands on My preemptions, a viewer on the Overview: open /mine for both.
        browser.wait_rendered(timeout_s=120)
        browser.navigate(dashboard.url.rstrip("/") + "/mine")
        state, _ = browser.wait_rendered(timeout_s=120, title="My preemptions")
        sidebar = str(js(browser, "document.querySelector('[data-testid=\"stSidebar\"]').innerText"))
        return state.text, sidebar


def own(text: str) -> int:
    found = re.search(r"Your jobs\s*\n+\s*Preemptions\s*\n+\s*(\d+)", text)
    assert found, text[:400]
    return int(found.group(1))


def test_a_verified_address_of_a_configured_domain_is_its_cluster_user(site: tuple[Provider, Dashboard]) -> None:
    text, sidebar = logged_in_as(site, "real")
    assert "(team:llm)" in sidebar
    assert own(text) == 1 and "llm-job-7" in text


def test_the_same_name_at_another_domain_is_someone_else(site: tuple[Provider, Dashboard]) -> None:
    text, sidebar = logged_in_as(site, "mallory")
    assert "(viewer)" in sidebar
    assert own(text) == 0 and "llm-job-7" not in text


def test_an_unverified_address_maps_to_nobody(site: tuple[Provider, Dashboard]) -> None:
    text, sidebar = logged_in_as(site, "eve")
    assert "(viewer)" in sidebar and "team:llm" not in sidebar
    assert own(text) == 0 and "llm-job-7" not in text
