"""Settings of the test provider; $OIDC_TEST_ROOT holds its database, $OIDC_TEST_URL is its public URL."""

import os
from pathlib import Path

ROOT = Path(os.environ["OIDC_TEST_ROOT"])
SECRET_KEY = os.environ["OIDC_TEST_DJANGO_KEY"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.2"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "oidc_site.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [Path(__file__).parent / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
    ]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ROOT / "provider.sqlite3"}}
USE_TZ = True
LOGIN_URL = "/accounts/login/"
SITE_URL = os.environ["OIDC_TEST_URL"]
OIDC_USERINFO = "oidc_site.claims.userinfo"
OIDC_IDTOKEN_INCLUDE_CLAIMS = True
OIDC_IDTOKEN_PROCESSING_HOOK = "oidc_site.claims.with_groups"
