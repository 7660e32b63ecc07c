"""Logging in with OpenID Connect (Streamlit's st.login) against a real provider, django-oidc-provider,
in headless Chromium: the login form is the provider's, the role comes from the ID token's groups claim,
and logging out ends the provider's session too (the next login asks for the password again). The client
secret and the cookie secret are given by reference ($env, $file) and never reach the dashboard's log."""

from __future__ import annotations

import json
import re
import secrets
import sys
import time
from pathlib import Path

from browser import Chromium, Dashboard, free_port
from oidc import Provider

PASSWORD = "correct horse"


def js(browser: Chromium, expression: str) -> object:
    return browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})["result"].get("value")


def wait_for(browser: Chromium, expression: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not js(browser, expression):
        if time.monotonic() > deadline:
            page = js(browser, "document.body.innerText")
            raise AssertionError(f"not within {timeout_s} s: {expression}; page: {page}")
        time.sleep(0.1)


def click_button(browser: Chromium, label: str) -> None:
    wait_for(browser, f"Array.from(document.querySelectorAll('button')).some(b => b.innerText.trim() === "
                      f"{json.dumps(label)})")
    js(browser, f"Array.from(document.querySelectorAll('button')).find(b => b.innerText.trim() === "
                f"{json.dumps(label)}).click()")


def provider_login(browser: Chromium, user: str) -> None:
    wait_for(browser, "document.querySelector('#username') !== null")
    js(browser, f"document.querySelector('#username').value = {json.dumps(user)};"
                f"document.querySelector('#password').value = {json.dumps(PASSWORD)};"
                "document.querySelector('#submit').click()")


def test_oidc_login_roles_and_logout(cluster_warehouse: Path, tmp_path: Path) -> None:
    port = free_port()
    redirect = f"http://127.0.0.1:{port}/oauth2callback"
    users = {"vision-user": "vision-team", "ana": "platform"}
    with Provider(tmp_path / "provider", users, PASSWORD, redirect) as provider:
        cookie_secret = tmp_path / "cookie-secret"
        cookie_secret.write_text(secrets.token_urlsafe(32))
        config = tmp_path / "preemptlens.toml"
        config.write_text(
            "[access]\noidc = true\n"
            f'oidc_metadata_url = "{provider.metadata_url}"\noidc_client_id = "{provider.client_id}"\n'
            'oidc_client_secret = { "$env" = "TEST_OIDC_CLIENT_SECRET" }\n'
            f'oidc_cookie_secret = {{ "$file" = "{cookie_secret}" }}\n'
            f'oidc_redirect_uri = "{redirect}"\noidc_prompt = "login"\n'
            'groups = { vision-team = "team:vision", platform = "admin" }\n'
        )
        env = {"PATH": "/usr/bin:/bin", "TEST_OIDC_CLIENT_SECRET": provider.client_secret}
        log = tmp_path / "streamlit.log"
        program = (sys.executable, "-m", "preemptlens.cli", "--config", str(config))
        with Dashboard(cluster_warehouse, log, port=port, program=program, env=env) as dashboard, \
                Chromium() as browser:
            browser.navigate(dashboard.url)
            state, _ = browser.wait_rendered(timeout_s=120, title="preemptlens")
            assert "Log in to see your preemptions" in state.text
            click_button(browser, "Log in")
            provider_login(browser, "vision-user")
            state, _ = browser.wait_rendered(timeout_s=120, title="My preemptions")
            assert re.match(r"My preemptions\s+vision-user \(vision\) ·", state.text), state.text[:200]
            sidebar = str(js(browser, "document.querySelector('[data-testid=\"stSidebar\"]').innerText"))
            assert "Signed in as vision-user (team:vision)" in sidebar and "SQL" not in sidebar

            click_button(browser, "Log out")
            state, _ = browser.wait_rendered(timeout_s=120, title="preemptlens")
            assert "Log in to see your preemptions" in state.text
            # The provider ended its session too, and sent the browser back to the dashboard.
            assert "GET /openid/end-session?" in provider.log.read_text()
            assert str(js(browser, "document.location.href")).startswith(dashboard.url)
            # Logging in again, as an admin this time.
            click_button(browser, "Log in")
            provider_login(browser, "ana")
            # an admin lands on the Overview
            state, _ = browser.wait_rendered(timeout_s=120, title="Preemption overview")
            sidebar = str(js(browser, "document.querySelector('[data-testid=\"stSidebar\"]').innerText"))
            assert "Signed in as ana (admin)" in sidebar and "SQL" in sidebar
    output = log.read_text()
    assert provider.client_secret not in output and cookie_secret.read_text() not in output
