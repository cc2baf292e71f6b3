"""Riding out an outage of the object store: retries with backoff, for as long as the caller
can wait.

Who can wait differs: a running job can wait a lease time (its lease is renewed from the
database meanwhile) before it hands itself back to the queue; an API request cannot, and
answers 503 at once. So the patience is not a property of the store but of the caller:
`storage_patience(seconds)` sets it for the code inside the `with` (a context variable, so
it stays with the job's thread), and the default is none.

The process also keeps one outage clock: the time of the first failure since the last
success. `StorageUnavailable.outage_seconds` carries it, so a job handed back again and
again can tell when the outage has outlasted `storage_outage_limit_seconds`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

from archsearch.jobs.platform.objects.base import ObjectStore, StorageUnavailable, StoredObject

log = logging.getLogger(__name__)
T = TypeVar("T")
_patience: ContextVar[float] = ContextVar("storage_patience", default=0.0)
FIRST_PAUSE, LONGEST_PAUSE = 0.5, 8.0


@contextmanager
def storage_patience(seconds: float) -> Iterator[None]:
    """Inside the block, storage calls retry transient errors for up to `seconds`."""
    token = _patience.set(seconds)
    try:
        yield
    finally:
        _patience.reset(token)


class OutageClock:
    """When this process's current storage outage began (None: no outage)."""

    def __init__(self) -> None:
        self._since: float | None = None
        self._lock = threading.Lock()

    def failed(self) -> float:
        """Note a failure; the outage's length so far, in seconds."""
        with self._lock:
            now = time.monotonic()
            if self._since is None:
                self._since = now
            return now - self._since

    def succeeded(self) -> None:
        with self._lock:
            self._since = None


OUTAGE = OutageClock()


def with_retries(call: Callable[[], T], what: str) -> T:
    """`call()`, retried on `StorageUnavailable` with growing pauses within the patience."""
    deadline = time.monotonic() + _patience.get()
    pause = FIRST_PAUSE
    while True:
        try:
            result = call()
        except StorageUnavailable as exc:
            exc.outage_seconds = OUTAGE.failed()
            if time.monotonic() + pause > deadline:
                raise
            log.warning("object store unavailable (%s) during %s; retry in %.1fs", exc, what, pause)
            time.sleep(pause)
            pause = min(pause * 2, LONGEST_PAUSE)
            continue
        OUTAGE.succeeded()
        return result


class RetryingObjectStore:
    """An `ObjectStore` whose calls ride out transient errors within the caller's patience.

    A ranged read (`iter_range`) is not retried: only the API streams, and it has none."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.description = inner.description

    def put_bytes(self, key: str, data: bytes) -> None:
        with_retries(lambda: self.inner.put_bytes(key, data), f"writing {key}")

    def move_in(self, key: str, path: Path) -> None:
        with_retries(lambda: self.inner.move_in(key, path), f"writing {key}")

    def get_bytes(self, key: str) -> bytes:
        return with_retries(lambda: self.inner.get_bytes(key), f"reading {key}")

    def size(self, key: str) -> int | None:
        return with_retries(lambda: self.inner.size(key), f"looking up {key}")

    def iter_range(self, key: str, start: int, stop: int) -> Iterator[bytes]:
        return self.inner.iter_range(key, start, stop)

    @contextmanager
    def local_file(self, key: str) -> Iterator[Path]:
        def enter() -> tuple[AbstractContextManager[Path], Path]:
            manager = self.inner.local_file(key)
            return manager, manager.__enter__()

        manager, path = with_retries(enter, f"downloading {key}")
        try:
            yield path
        finally:
            manager.__exit__(None, None, None)

    def local_path(self, key: str) -> Path | None:
        return self.inner.local_path(key)

    def delete(self, key: str) -> None:
        with_retries(lambda: self.inner.delete(key), f"deleting {key}")

    def delete_prefix(self, prefix: str) -> None:
        with_retries(lambda: self.inner.delete_prefix(prefix), f"deleting {prefix}")

    def presigned_url(self, key: str, seconds: int, filename: str) -> str | None:
        return self.inner.presigned_url(key, seconds, filename)

    def list_objects(self, prefix: str) -> Iterator[StoredObject]:
        return iter(with_retries(lambda: list(self.inner.list_objects(prefix)), "listing"))

    def check(self) -> None:
        self.inner.check()
