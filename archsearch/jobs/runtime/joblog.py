"""Capturing one job's log lines while it runs, into `job_log_lines`.

A `logging.Handler` is attached to the `archsearch` and `py.warnings` loggers for the run
(`logging.captureWarnings` turns `warnings.warn` into records of the latter), and what the
job's thread prints to stdout or stderr becomes lines too (loggers `stdout`, `stderr`). It
keeps only what the thread running the job produces, so the lease keeper, Celery and other
jobs of an embedded runner stay out. Records are buffered and written every `flush_seconds` in a
short transaction of their own; a database write never happens while the handler is
already writing (SQLAlchemy may log, too).

The log is bounded: past `max_bytes` per job (counting what earlier attempts stored), one
marker line is written and later lines are dropped; errors may use a further reserve, so
the traceback of a crash after a chatty run is still kept.
"""

from __future__ import annotations

import io
import logging
import sys
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

# `logging.captureWarnings` and sys.stdout/stderr are process-wide: the embedded runner may
# run several jobs at once, so both stay captured until the last of them ends.
_capturing = 0
_capturing_lock = threading.Lock()


# The job log of each thread running a job, for the stdout/stderr stand-ins below.
_job_logs: dict[int, JobLog] = {}


class _ThreadStream(io.TextIOBase):
    """Stands in for sys.stdout or sys.stderr while jobs run: complete lines a job's thread
    writes also become that job's log lines; every character still reaches the real stream."""

    def __init__(self, real: io.TextIOBase, level: str, name: str) -> None:
        self.real, self.level, self.name = real, level, name
        self.partial: dict[int, str] = {}

    def write(self, text: str) -> int:
        self.real.write(text)
        thread = threading.get_ident()
        job_log = _job_logs.get(thread)
        if job_log is not None:
            *lines, self.partial[thread] = (self.partial.get(thread, "") + text).split("\n")
            for line in lines:
                if line.strip():
                    job_log.add_line(self.level, self.name, line)
        return len(text)

    def flush(self) -> None:
        self.real.flush()

    def __getattr__(self, name: str) -> object:  # fileno, isatty, encoding, ...
        return getattr(self.real, name)


def _capture_process_wide(change: int) -> None:
    global _capturing
    with _capturing_lock:
        _capturing += change
        logging.captureWarnings(_capturing > 0)
        # Streams are process-wide too: installed with the first job, restored after the last.
        if change > 0 and _capturing == 1:
            sys.stdout = _ThreadStream(sys.stdout, "INFO", "stdout")  # type: ignore[arg-type]
            sys.stderr = _ThreadStream(sys.stderr, "WARNING", "stderr")  # type: ignore[arg-type]
        elif change < 0 and _capturing == 0:
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name)
                if isinstance(stream, _ThreadStream):
                    setattr(sys, name, stream.real)


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
        _job_logs[self.thread] = self
        _capture_process_wide(+1)
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
        _capture_process_wide(-1)
        _job_logs.pop(self.thread, None)
        self.write()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        self.add_line(record.levelname, record.name, self.format(record))

    def add_line(self, level: str, logger: str, message: str) -> None:
        """Keep one line within the job's size limit (errors may use the reserve)."""
        if self._writing:  # the database write itself may log or print: never recurse
            return
        is_error = logging.getLevelName(level) >= logging.ERROR
        limit = self.max_bytes + (ERROR_RESERVE if is_error else 0)
        if self.stored + len(message) > limit:
            if not self.truncated:
                self.truncated = True
                self._add("WARNING", __name__, repository.TRUNCATED)
            return
        self.stored += len(message)
        self._add(level, logger, message)
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
