"""Errors of the job domain; `api/errors.py` maps each to one HTTP status."""

from __future__ import annotations


class JobsError(Exception):
    pass


class NotFound(JobsError):
    pass


class InvalidTransition(JobsError):
    """A status change the state machine forbids (e.g. cancelling a finished job)."""


class InvalidCursor(JobsError):
    pass


class SchemaBehind(JobsError):
    """The database schema is older than the code."""


class TooLarge(JobsError):
    """An upload or request over a configured limit; the message names the limit."""
