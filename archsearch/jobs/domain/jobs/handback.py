"""Handing a running job back to the queue because its worker stops on purpose (an
eviction, a scale-down, a rolling update, Ctrl-C): nothing failed, so the attempt its claim
counted is given back, and the `preempted` event says why. The next claim resumes it from
its checkpoint. A worker lost without warning still costs an attempt (`claims.py`: its
lease expires). Callers own the transaction; nothing here commits.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from archsearch.jobs.domain.jobs.repository import get_job
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.domain.tables import JobStatus

PREEMPTED = "preempted"  # the first word of the event's reason


def hand_back(session: Session, job_id: uuid.UUID, worker: str, reason: str) -> bool:
    """Queue `worker`'s running job again, its attempt given back; False when the job is no
    longer this worker's (its lease went to another attempt, or it ended)."""
    job = get_job(session, job_id, for_update=True)
    if job.status is not JobStatus.running or job.worker != worker:
        return False
    transition(job, JobStatus.queued, f"{PREEMPTED}: {reason}", worker)
    job.attempts = max(0, job.attempts - 1)
    job.worker = None
    job.lease_expires_at = None
    return True
