"""Who is reading the dashboard, and what they may see.

Two ways to log in, configured in `[access]`:

- an auth proxy in front (oauth2-proxy, nginx auth_request or auth_basic ...)
  that authenticates the reader and passes who they are in request headers
  (`access.proxy_headers`). The headers are believed only where nobody but the
  proxy can send them: the dashboard listens on loopback (the proxy is on this
  host), or the connection comes from one of `access.proxy_addresses`; and,
  with `access.proxy_secret` set, only alongside that secret (loopback is no
  private line on a host where others have shells);
- OpenID Connect through Streamlit's own `st.login` (`access.oidc`): the
  launcher hands Streamlit the `[auth]` settings it resolved (secrets by
  reference) in a private secrets file (dashboards.launch).

With neither, the dashboard is open, and the launcher lets it listen on
loopback only: whoever can reach it is on this host, and sees what an admin
sees.

Roles come from `access.users` and `access.groups` (user or group -> `admin`,
`viewer` or `team:<name>`). An admin sees everything, including the SQL page,
raw quarantined records and alert delivery errors. Anyone else sees every
cluster-level figure, but job ids, job names, users and hosts of teams not
their own only where `masking.show_other_teams_jobs` allows: a reader's
`scope` says which, and dashboards.data masks every query result for it where
the rows leave the warehouse, before a page gets them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from preemptlens.config import Secret, header_name, http_url, section, setting
from preemptlens.reading.masking import EVERYTHING, Scope

ADMIN = "admin"
VIEWER = "viewer"
TEAM_PREFIX = "team:"


@section("access", "Who may read the dashboard and what each reader sees (docs/deploy.md shows both ways to log in).")
@dataclass(frozen=True)
class AccessSettings:
    proxy_headers: bool = setting(
        False,
        "Believe the user, email and groups an authenticating proxy in front passes in request headers; "
        "only when the dashboard listens on loopback or the connection comes from access.proxy_addresses.",
    )
    proxy_user_header: str = setting("X-Forwarded-User", "Header that names the logged-in user.", check=header_name)
    proxy_email_header: str = setting("X-Forwarded-Email", "Header with the logged-in user's email.", check=header_name)
    proxy_groups_header: str = setting(
        "X-Forwarded-Groups",
        "Header with the logged-in user's groups, separated by commas.",
        check=header_name,
    )
    proxy_addresses: list[str] = setting(
        [],
        "Addresses (or networks, e.g. 10.0.0.0/24) of the proxies allowed to pass the headers when the "
        "dashboard listens beyond loopback.",
    )
    proxy_secret: Secret | None = setting(
        None,
        "A secret the proxy sends in access.proxy_secret_header with every request; when set, the identity "
        "headers are believed only with it. Needed wherever others can reach the dashboard's address too "
        "(every user of a shared login node can connect to its loopback).",
    )
    proxy_secret_header: str = setting(
        "X-Preemptlens-Proxy-Secret", "Header that carries access.proxy_secret.",
        check=header_name,
    )
    oidc: bool = setting(
        False,
        "Log readers in with OpenID Connect (Streamlit's st.login), configured by the access.oidc_* settings.",
    )
    oidc_metadata_url: str = setting(
        "",
        "The provider's discovery document, https://.../.well-known/openid-configuration.",
        check=http_url,
    )
    oidc_client_id: str = setting("", "Client id registered with the provider.")
    oidc_client_secret: Secret | None = setting(None, "Client secret registered with the provider.")
    oidc_redirect_uri: str = setting(
        "",
        "Where the provider sends readers back: the dashboard's public URL followed by /oauth2callback.",
        check=http_url,
    )
    oidc_cookie_secret: Secret | None = setting(
        None,
        "Random string (32 bytes or more) that signs the login cookie; keep it stable across restarts.",
    )
    oidc_prompt: str = setting(
        "select_account",
        "The prompt parameter of the login request (Streamlit's default, select_account); set login for a "
        "provider that takes select_account as an endless request to log in again (django-oidc-provider).",
        choices=("select_account", "login", "consent", "none"),
    )
    oidc_groups_claim: str = setting(
        "groups",
        "Claim of the ID token that lists the reader's groups (matched against access.groups).",
    )
    oidc_user_claim: str = setting(
        "preferred_username",
        "Claim of the ID token that names the reader (matched against access.users; their user name on the "
        "cluster when access.login_is_cluster_user). Without it the reader is named by `sub`, which names no "
        "cluster user.",
    )
    login_is_cluster_user: bool = setting(
        True,
        "Whether the login name (the proxy's access.proxy_user_header, or access.oidc_user_claim) is, exactly, "
        "the reader's user name on the cluster (My preemptions shows that user's jobs as theirs).",
    )
    email_domains: list[str] = setting(
        [],
        "Email domains whose addresses name a cluster user by their local part (ana@example.org is cluster user "
        "ana when example.org is listed); an address of any other domain names only the cluster user spelled "
        "as the whole address. With OpenID Connect an email counts only when the token says email_verified.",
        check=lambda value: _domains_problem(value),
    )
    users: dict[str, Any] = setting(
        {},
        "Role of each user (name or email): admin, viewer or team:<name>, e.g. { alice = \"team:vision\" }.",
    )
    groups: dict[str, Any] = setting(
        {},
        "Role of each group's members, e.g. { ml-platform = \"admin\" }; a user's own entry comes first, "
        "and a member of several groups gets the strongest role (admin, then every team named).",
    )
    default_role: str = setting(
        VIEWER,
        "Role of a logged-in reader that access.users and access.groups do not name: viewer or team:<name>.",
    )


SETTINGS = AccessSettings


def role_problem(role: str) -> str | None:
    """Why `role` is not a role, or None."""
    if role in (ADMIN, VIEWER) or (role.startswith(TEAM_PREFIX) and role[len(TEAM_PREFIX):].strip()):
        return None
    return f"{role!r} is not a role (admin, viewer or team:<name>)"


@dataclass(frozen=True)
class Reader:
    """The person reading, as far as the dashboard knows: `user` None means nobody logged in."""

    user: str | None
    email: str | None = None
    groups: tuple[str, ...] = ()
    admin: bool = False
    teams: tuple[str, ...] = ()
    # How they came in: "proxy", "oidc" or "open" (no login configured).
    via: str = "open"
    # Whether job-level rows of other teams are shown (masking.show_other_teams_jobs; always for an admin).
    others_jobs: bool = True
    # The cluster user names that are this reader, exactly (see `cluster_users`): whose jobs are "yours".
    cluster_users: tuple[str, ...] = ()

    @property
    def role(self) -> str:
        if self.admin:
            return ADMIN
        return ", ".join(f"{TEAM_PREFIX}{t}" for t in self.teams) or VIEWER

    @property
    def scope(self) -> Scope:
        """Whose job-level rows this reader sees (dashboards.data masks every result for it)."""
        return EVERYTHING if self.admin or self.others_jobs else Scope(False, tuple(sorted(self.teams)))


OPEN = Reader(user=None, admin=True, via="open")


def resolve(access: AccessSettings, user: str | None, email: str | None, groups: tuple[str, ...],
            via: str, others_jobs: bool, *, login_names_user: bool = True) -> Reader:
    """The role of a logged-in reader from access.users, access.groups and access.default_role, and the cluster
    users they are. `email` is one the login vouches for (a proxy's header, a verified OpenID Connect claim);
    `login_names_user` is False when `user` is no name of the reader's (OpenID Connect's opaque `sub`)."""
    users: Mapping[str, str] = access.users
    by_group: Mapping[str, str] = access.groups
    roles = [users[k] for k in (user, email) if k and k in users] or [by_group[g] for g in groups if g in by_group]
    roles = roles or [access.default_role]
    admin = ADMIN in roles
    teams = tuple(dict.fromkeys(r[len(TEAM_PREFIX):] for r in roles if r.startswith(TEAM_PREFIX)))
    reader = Reader(user=user or email, email=email, groups=groups, admin=admin, teams=teams, via=via,
                    cluster_users=cluster_users(access, user if login_names_user else None, email))
    return replace(reader, others_jobs=admin or others_jobs)


def cluster_users(access: AccessSettings, login: str | None, email: str | None) -> tuple[str, ...]:
    """The cluster user names that are the reader, exactly: their login name when access.login_is_cluster_user,
    their email as it is, and its local part only when its domain is one of access.email_domains (so
    llm-user8@elsewhere is never cluster user llm-user8)."""
    found = []
    if login and access.login_is_cluster_user:
        found.append(login)
    if email:
        found.append(email)
        local, at, domain = email.rpartition("@")
        if at and local and domain.lower() in {d.lower() for d in access.email_domains}:
            found.append(local)
    return tuple(dict.fromkeys(found))


def email_verified(claims: Mapping[str, object]) -> str | None:
    """The email of an OpenID Connect login when the provider says it verified it (`email_verified` true),
    else None: an unverified address may be anyone's."""
    email, verified = claims.get("email"), claims.get("email_verified")
    if not isinstance(email, str) or not email or "@" not in email:
        return None
    return email if verified is True or (isinstance(verified, str) and verified.lower() == "true") else None


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})+$", re.ASCII)


def _domains_problem(value: object) -> str | None:
    bad = [str(d) for d in value if not _DOMAIN.match(str(d))] if isinstance(value, list) else []
    return f"expected domain names such as example.org, got {bad[0][:60]!r}" if bad else None


def config_problems(access: AccessSettings, address: str) -> list[str]:
    """What is wrong with `[access]` for a dashboard listening on `address`: every problem, one line each."""
    problems = [
        f"access.{where}.{key}: {problem}"
        for where, roles in (("users", access.users), ("groups", access.groups))
        for key, role in roles.items()
        if (problem := role_problem(str(role)))
    ]
    default = access.default_role
    if default == ADMIN:
        problems.append("access.default_role: admin is given by name only (access.users, access.groups)")
    elif problem := role_problem(default):
        problems.append(f"access.default_role: {problem}")
    if access.oidc:
        needed = {"oidc_metadata_url": access.oidc_metadata_url, "oidc_client_id": access.oidc_client_id,
                  "oidc_client_secret": access.oidc_client_secret, "oidc_redirect_uri": access.oidc_redirect_uri,
                  "oidc_cookie_secret": access.oidc_cookie_secret}
        for key, value in needed.items():
            if not value:
                problems.append(f"access.{key}: needed when access.oidc is true")
        if access.oidc_redirect_uri and not access.oidc_redirect_uri.endswith("/oauth2callback"):
            problems.append("access.oidc_redirect_uri: must end with /oauth2callback")
    for entry in access.proxy_addresses:
        try:
            ipaddress.ip_network(str(entry), strict=False)
        except ValueError:
            problems.append(f"access.proxy_addresses: {entry!r} is not an address or network")
    if access.proxy_headers and access.oidc:
        problems.append("access.proxy_headers and access.oidc: choose one way to log in")
    if not (access.proxy_headers or access.oidc) and not is_loopback(address):
        problems.append(
            f"dashboard.address {address}: with no login configured the dashboard listens on loopback only; "
            "set access.proxy_headers or access.oidc (docs/deploy.md)"
        )
    return problems


def is_loopback(address: str | None) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(address)).is_loopback
    except ValueError:
        return False


def proxy_trusted(access: AccessSettings, listen_address: str | None, peer: str | None) -> bool:
    """Whether the connection's identity headers come from the auth proxy: only the proxy can reach a
    dashboard on loopback (it runs on this host), else the peer must be one of access.proxy_addresses.
    `peer` None is a loopback peer (how Streamlit reports one)."""
    if is_loopback(listen_address):
        return True
    address = ipaddress.ip_address(peer) if peer else ipaddress.ip_address("127.0.0.1")
    return any(address in ipaddress.ip_network(str(n), strict=False) for n in access.proxy_addresses)


def header_groups(value: str | None) -> tuple[str, ...]:
    return tuple(g.strip() for g in (value or "").split(",") if g.strip())
