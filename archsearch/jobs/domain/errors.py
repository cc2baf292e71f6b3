"""The domain's error base classes, and the errors the jobs, accounts and datasets rooms
raise.

`api/errors.py` maps each base class to one HTTP status: `Unauthenticated` 401, `Forbidden`
403, `NotFound` 404, `InvalidTransition` 409, `TooLarge` 413, `InvalidCursor` and `UserError`
(bad input, with `field` when one field is to blame) 422, `Busy` 503.
Messages tell the user what to do.

An error that one rule alone raises lives beside that rule, as a subclass of a base here or
of `UserError`, so the table maps it with no entry of its own: `InvalidStudy`
(`studies/expansion.py`), `InvalidName` (`models/service.py`), `InvalidWindow`
(`usage/service.py`), `ReferencedJobError` (`jobs/validation.py`), and outside the domain
`UnsafeTarget` (`jobs/platform/outbound.py`), `TooManyAttempts` (`api/throttle.py`, 429)
and `InvalidVersionRef` (`api/params.py`).
"""

from __future__ import annotations

from archsearch.core.errors import UserError


class JobsError(Exception):
    """Base of the domain's errors that are not the user's input (those are `UserError`)."""


class Unauthenticated(JobsError):
    """No valid token: 401."""


class Forbidden(JobsError):
    """A valid token that may not do this: 403."""


class NotFound(JobsError):
    """No such resource, or one of another team (reported exactly alike)."""


class InvalidTransition(JobsError):
    """A status change the state machine forbids (e.g. cancelling a finished job)."""


class InvalidCursor(JobsError):
    pass


class TooLarge(JobsError):
    """An upload or request over a configured limit; the message names the limit."""


class Busy(JobsError):
    """The server holds as much of this kind of work as it is configured to; retry later."""


# Datasets


class DatasetNotFound(NotFound):
    pass


class PreviewUnavailable(JobsError):
    """The dataset exists but has no preview image (it holds feature vectors, not images)."""


class DatasetInUse(InvalidTransition):
    """Deleting a dataset that a queued or running job trains on."""


class LimitExceeded(TooLarge):
    """An upload over a configured limit (413); the message names the limit and its setting."""

    def __init__(self, what: str, limit: int, setting: str, unit: str = "bytes") -> None:
        super().__init__(
            f"{what} is over the limit of {limit:,} {unit} (ARCHSEARCH_{setting.upper()})"
        )
        self.limit = limit
        self.setting = setting


class InvalidUpload(UserError):
    """The uploaded file is not a dataset we can use; the message says what is expected."""

    def __init__(self, message: str, field: str = "file") -> None:
        super().__init__(message)
        self.field = field


class UnsafeArchive(InvalidUpload):
    """A zip entry with an absolute path or '..', or an encrypted entry."""


class UnofferedDevice(UserError):
    """A job asks for a device no worker of this deployment can ever offer (a 422)."""

    field = "resources.device"


class UnknownUploadedDataset(UserError):
    """A job names an uploaded dataset id that does not exist (a 422 on the job's field)."""

    field = "dataset.id"


class AmbiguousId(JobsError):
    """A start of an id that several resources' ids share; `candidates` lists some of them."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates
