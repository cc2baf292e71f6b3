"""Uploads validated in turn: a bounded pool of validation threads and a bounded waiting
line, one per API process, so no upload request waits without bound (503 `busy` past it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from archsearch.jobs.domain.errors import Busy
from archsearch.jobs.platform.settings import Settings

Result = TypeVar("Result")


class UploadSlots:
    """`upload_concurrent_validations` threads; `upload_max_waiting` more uploads may wait
    in their queue (their files are on disk, not in memory); beyond that, refused at once."""

    def __init__(self, settings: Settings) -> None:
        self.threads = settings.upload_concurrent_validations
        self.capacity = self.threads + settings.upload_max_waiting
        self._executor = ThreadPoolExecutor(self.threads, "upload-validation")
        # Uploads being validated or waiting. Only the event loop's thread touches it (the
        # route is async), so a plain counter needs no lock.
        self.in_flight = 0

    async def validate(self, upload: Callable[[], Result]) -> Result:
        if self.in_flight >= self.capacity:
            raise Busy(
                f"{self.in_flight} uploads are being validated or waiting "
                f"(ARCHSEARCH_UPLOAD_CONCURRENT_VALIDATIONS + ARCHSEARCH_UPLOAD_MAX_WAITING = "
                f"{self.capacity}); retry after the Retry-After seconds"
            )
        self.in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, upload)
        finally:
            self.in_flight -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
