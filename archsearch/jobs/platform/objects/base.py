"""What every object-storage backend offers (`ObjectStore`) and the errors they raise."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

CHUNK = 1 << 20  # bytes per read when streaming a download


@dataclass(frozen=True)
class S3Credentials:
    """Where an S3-compatible server is and, optionally, the keys to it (None: boto3 finds
    them as usual, from AWS_ACCESS_KEY_ID and friends, a profile or an instance role)."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)


class ObjectMissing(LookupError):
    """No object under that key."""


class StorageConfigError(ValueError):
    """`storage_url` names a scheme or bucket this service cannot use, or the store refuses
    the credentials: an infrastructure problem for the administrator, never a bug."""


class StorageUnavailable(Exception):
    """The store did not answer, or answered a transient error (5xx, throttling, timeout).

    `outage_seconds` is how long this process has seen the store failing without a single
    success in between (0 when unknown), so a job can tell a blip from a long outage."""

    def __init__(self, message: str, outage_seconds: float = 0.0) -> None:
        super().__init__(message)
        self.outage_seconds = outage_seconds


@dataclass(frozen=True)
class StoredObject:
    """One object of a listing: its key (relative to the store) and age."""

    key: str
    age_seconds: float


class ObjectStore(Protocol):
    """Where the service keeps its files; keys are `/`-separated relative paths."""

    description: str

    def put_bytes(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing any object there, atomically."""

    def move_in(self, key: str, path: Path) -> None:
        """Store the local file `path` under `key` and consume it (large files stream)."""

    def get_bytes(self, key: str) -> bytes:
        """The whole object; `ObjectMissing` when there is none."""

    def size(self, key: str) -> int | None:
        """The object's size in bytes, or None when there is none."""

    def iter_range(self, key: str, start: int, stop: int) -> Iterator[bytes]:
        """Bytes `start` up to (not including) `stop`, in chunks of at most `CHUNK`."""

    def local_file(self, key: str) -> AbstractContextManager[Path]:
        """A local path holding the object for the duration of the `with` block."""

    def local_path(self, key: str) -> Path | None:
        """The object's own file when the backend is a local folder, else None."""

    def delete(self, key: str) -> None:
        """Remove the object; a missing one is not an error."""

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object whose key starts with `prefix` (a folder, ending in `/`)."""

    def presigned_url(self, key: str, seconds: int, filename: str) -> str | None:
        """A short-lived URL a client may GET directly, or None if the backend has none."""

    def list_objects(self, prefix: str) -> Iterator[StoredObject]:
        """Every object whose key starts with `prefix`, with its age."""

    def check(self) -> None:
        """Raise `StorageUnavailable` or `StorageConfigError` unless the store answers."""
