"""Capturing one job's log lines while it runs, into `job_log_lines`.

A `logging.Handler` is attached to the `archsearch` and `py.warnings` loggers for the run
(`logging.captureWarnings` turns `warnings.warn` into records of the latter). It keeps only
records of the thread running the job, so the lease keeper, Celery and other jobs of an
embedded runner stay out. Records are buffered and written every `flush_seconds` in a
short transaction of their own; a database write never happens while the handler is
already writing (SQLAlchemy may log, too).

The log is bounded: past `max_bytes` per job (counting what earlier attempts stored), one
marker line is written and later lines are dropped; errors may use a further reserve, so
the traceback of a crash after a chatty run is still kept.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from types import TracebackType

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.joblogs import repository
from archsearch.jobs.domain.joblogs.repository import PendingLine
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services

CAPTURED_LOGGERS = ("archsearch", "py.warnings")
ERROR_RESERVE = 64 << 10  # bytes beyond the limit kept for errors and tracebacks

log = logging.getLogger(__name__)

# `logging.captureWarnings` is process-wide: the embedded runner may run several jobs at once,
# so warnings stay captured until the last of them ends.
_capturing = 0
_capturing_lock = threading.Lock()


def _capture_warnings(change: int) -> None:
    global _capturing
    with _capturing_lock:
        _capturing += change
        logging.captureWarnings(_capturing > 0)


class JobLog(logging.Handler):
    def __init__(self, services: Services, job_id: uuid.UUID, flush_seconds: float = 2.0) -> None:
        super().__init__(level=logging.INFO)
        self.setFormatter(logging.Formatter("%(message)s"))
        self.services = services
        self.job_id = job_id
        self.max_bytes = services.settings.job_log_max_bytes
        self.flush_seconds = flush_seconds
        self.thread = threading.get_ident()
        self.pending: list[PendingLine] = []
        self.stored = 0
        self.truncated = False
        self._writing = False
        self._last_write = time.monotonic()

    def __enter__(self) -> JobLog:
        with transaction(self.services.sessions) as session:
            self.stored = repository.stored_bytes(session, self.job_id)
        self.truncated = self.stored >= self.max_bytes
        _capture_warnings(+1)
        for name in CAPTURED_LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for name in CAPTURED_LOGGERS:
            logging.getLogger(name).removeHandler(self)
        _capture_warnings(-1)
        self.write()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread or self._writing:
            return
        message = self.format(record)
        limit = self.max_bytes + (ERROR_RESERVE if record.levelno >= logging.ERROR else 0)
        if self.stored + len(message) > limit:
            if not self.truncated:
                self.truncated = True
                self._add("WARNING", __name__, repository.TRUNCATED)
            return
        self.stored += len(message)
        self._add(record.levelname, record.name, message)
        if time.monotonic() - self._last_write >= self.flush_seconds:
            self.write()

    def _add(self, level: str, logger: str, message: str) -> None:
        self.pending.append(PendingLine(utcnow(), level, logger[:200], message))

    def write(self) -> None:
        """Store the buffered lines; best effort, the run must not fail for its log."""
        if self._writing or not self.pending:
            return
        self._writing = True
        try:
            with transaction(self.services.sessions) as session:
                repository.append_lines(session, self.job_id, self.pending)
            self.pending = []
        except Exception:  # the database may be down; the run's outcome matters more
            log.warning("could not store log lines of job %s", self.job_id, exc_info=True)
        finally:
            self._writing = False
            self._last_write = time.monotonic()
