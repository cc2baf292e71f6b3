"""Errors of dataset uploads; each maps to one HTTP status through its base class:
`UserError` 422 (bad content, with `field`), `TooLarge` 413 (a limit, named with its setting),
`InvalidTransition` 409 (in use), `NotFound` 404."""

from __future__ import annotations

from archsearch.core.errors import UserError
from archsearch.jobs.domain.errors import InvalidTransition, NotFound, TooLarge


class InvalidUpload(UserError):
    """The uploaded file is not a dataset we can use; the message says what is expected."""

    def __init__(self, message: str, field: str = "file") -> None:
        super().__init__(message)
        self.field = field


class UnsafeArchive(InvalidUpload):
    """A zip entry with an absolute path or '..', or an encrypted entry."""


class LimitExceeded(TooLarge):
    """An upload over a configured limit (413); the message names the limit and its setting."""

    def __init__(self, what: str, limit: int, setting: str, unit: str = "bytes") -> None:
        super().__init__(
            f"{what} is over the limit of {limit:,} {unit} (ARCHSEARCH_{setting.upper()})"
        )
        self.limit = limit
        self.setting = setting


class DatasetNotFound(NotFound):
    pass


class DatasetInUse(InvalidTransition):
    """Deleting a dataset that a queued or running job trains on."""


class UnknownUploadedDataset(UserError):
    """A job names an uploaded dataset id that does not exist (a 422 on the job's field)."""

    field = "dataset.id"
