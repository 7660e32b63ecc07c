"""A real OpenID Connect provider for the login tests: django-oidc-provider in Django's own server on a
free loopback port (tests/dashboards/oidc_site), with users, groups and one confidential client."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from browser import Server, free_port

SETUP = """
import sys
import django
django.setup()
from django.contrib.auth.models import Group, User
from oidc_provider.models import Client, ResponseType

client_id, client_secret, redirect, password, *users = sys.argv[1:]
for entry in users:
    # name=groups, or name=groups=email=verified (the provider's claim email_verified: "yes" or "no")
    name, groups, *more = entry.split("=")
    email, verified = more if more else (f"{name}@example.org", "yes")
    user = User.objects.create_user(name, email, password)
    # Where the test provider keeps whether it verified the address (claims.userinfo reads it).
    user.first_name = "verified" if verified == "yes" else "unverified"
    user.save()
    for group in filter(None, groups.split(",")):
        user.groups.add(Group.objects.get_or_create(name=group)[0])
client = Client.objects.create(name="preemptlens", client_type="confidential", client_id=client_id,
                               client_secret=client_secret, require_consent=False, jwt_alg="RS256")
client.redirect_uris = [redirect]
client.post_logout_redirect_uris = [redirect]
client.save()
client.response_types.add(ResponseType.objects.get(value="code"))
"""


class Provider(Server):
    """The provider at `url` (its issuer is `url`/openid), serving `users` (name -> comma-separated groups, and
    optionally "=email=yes|no": the address and whether the provider verified it; by default name@example.org,
    verified), each with `password`, and one client whose redirect URI is `redirect_uri`."""

    def __init__(self, root: Path, users: dict[str, str], password: str, redirect_uri: str) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        # Another loopback address than the dashboard's 127.0.0.1: the browser keeps the two sites' cookies apart.
        self.url = f"http://127.0.0.2:{self.port}"
        self.metadata_url = f"{self.url}/openid/.well-known/openid-configuration"
        self.client_id = "preemptlens-dashboard"
        self.client_secret = secrets.token_urlsafe(24)
        self.env = {
            **os.environ,
            "PYTHONPATH": str(Path(__file__).parent),
            "DJANGO_SETTINGS_MODULE": "oidc_site.settings",
            "OIDC_TEST_ROOT": str(root),
            "OIDC_TEST_URL": self.url,
            "OIDC_TEST_DJANGO_KEY": secrets.token_urlsafe(32),
        }
        self._manage("migrate", "--no-input", "-v", "0")
        self._manage("creatersakey")
        subprocess.run(
            [sys.executable, "-c", SETUP, self.client_id, self.client_secret, redirect_uri, password,
             *(f"{u}={g}" for u, g in users.items())],
            env=self.env, check=True, capture_output=True,
        )
        self.log = root / "provider.log"
        self.start([sys.executable, "-m", "django", "runserver", f"127.0.0.2:{self.port}", "--noreload"],
                   self.log, self.metadata_url, 60, self.env)

    def _manage(self, *argv: str) -> None:
        subprocess.run([sys.executable, "-m", "django", *argv], env=self.env, check=True, capture_output=True)
