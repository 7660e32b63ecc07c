"""The fake API server (k8s_fake) as a fixture, one per test."""

from k8s_fake import api  # noqa: F401 (the fixture, shared with tests/actions)
