"""The claims the provider puts in its ID tokens: the standard ones, and the user's Django groups."""

from typing import Any


def userinfo(claims: dict[str, Any], user: Any) -> dict[str, Any]:
    claims["preferred_username"] = user.username
    claims["name"] = user.username
    claims["email"] = user.email
    claims["email_verified"] = user.first_name == "verified"
    return claims


def with_groups(id_token: dict[str, Any], user: Any, **kwargs: Any) -> dict[str, Any]:
    id_token["groups"] = sorted(g.name for g in user.groups.all())
    return id_token
