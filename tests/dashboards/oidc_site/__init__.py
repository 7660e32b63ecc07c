"""A Django site running django-oidc-provider: the real OpenID Connect provider of the login tests."""
