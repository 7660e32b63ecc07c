"""One exception class per failure the runner must tell apart.

Every error carries a hint that tells the user what to do next. Messages never
contain secrets: callers pass redacted values.
"""

from __future__ import annotations


class PreemptlensError(Exception):
    """Base class; `hint` says what to do about it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class ConfigError(PreemptlensError):
    """The configuration is invalid; fatal at start-up."""


class SchemaError(PreemptlensError):
    """The warehouse's schema is not one this version can use."""


class ContractError(PreemptlensError):
    """A frame handed to the load API does not fit the raw contract at all
    (unknown table, missing key column): a bug in the collector, not bad data."""


class SourceError(PreemptlensError):
    """A source could not be read at all (server unreachable, command missing)."""


class TransientSourceError(SourceError):
    """A source failed in a way that may pass (timeout, 503): retry with backoff."""
