"""Whether a queued job's device is offered by any worker: a job asking for CUDA waits for a
CUDA worker; when none has been seen for `device_unseen_seconds`, its pending reason says
it may never start (the embedded server refuses such a job at submit instead)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import worker_repository
from archsearch.jobs.domain.tables import Job, WorkerRecord
from archsearch.jobs.platform.settings import Settings

WAITING = "waiting for a worker with a CUDA device"


def missing_device_reason(
    session: Session, job: Job, settings: Settings, live: list[WorkerRecord]
) -> str | None:
    """None when a live worker offers the job's device (or it asks for none in particular)."""
    if job.device != "cuda" or any(w.device == "cuda" for w in live):
        return None
    unseen = settings.device_unseen_seconds
    since = utcnow() - timedelta(seconds=unseen)
    # A worker that crashed keeps its row for an hour; one that stopped cleanly leaves none,
    # so this counts it as unseen from its stop.
    if any(w.device == "cuda" for w in worker_repository.workers_seen_since(session, since)):
        return WAITING
    return (
        f"{WAITING}; none has been seen for {_duration(unseen)}, so it may never start "
        "(cancel it and submit it with resources.device 'auto' or 'cpu')"
    )


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
