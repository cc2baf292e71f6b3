"""A process's request to stop its jobs gracefully (SIGTERM from an eviction, a scale-down,
a rolling update; Ctrl-C; the embedded server shutting down).

A running job sees the request through its run context: it goes on to its next checkpoint,
then is handed back to the queue without spending an attempt; once `grace_seconds` have
passed without one, it stops at its next step and resumes from its previous checkpoint.
"""

from __future__ import annotations

import math
import threading
import time


class StopRequest:
    """Set once per process; safe to call from a signal handler (no lock, no I/O)."""

    def __init__(self) -> None:
        self._requested = threading.Event()
        self._deadline = math.inf
        self.reason = ""

    def request(self, reason: str, grace_seconds: float) -> None:
        if self._requested.is_set():
            return  # the first request's deadline stands (a second SIGTERM extends nothing)
        self.reason = reason
        self._deadline = time.monotonic() + grace_seconds
        self._requested.set()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def overdue(self) -> bool:
        """Requested, and the grace for reaching a checkpoint is over."""
        return self._requested.is_set() and time.monotonic() >= self._deadline
