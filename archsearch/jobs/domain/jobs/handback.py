"""Handing a running job back to the queue because of a cause outside the job: its worker
stops on purpose (an eviction, a scale-down, a rolling update, Ctrl-C; a `preempted` event
says why) or the object store is away. Nothing of the job failed, so the attempt its claim
counted is given back, and an outage or an eviction never exhausts `max_attempts`. The next
claim resumes it from its checkpoint. A worker lost without warning still costs an attempt
(`claims.py`: its lease expires). Callers own the transaction; nothing here commits.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from archsearch.jobs.domain.jobs.repository import get_job
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.domain.usage import repository as usage
from archsearch.jobs.domain.webhooks import events
from archsearch.schemas.jobs import JobStatus

PREEMPTED = "preempted"  # the first word of the event's reason


def hand_back(
    session: Session, job_id: uuid.UUID, worker: str, reason: str, *, preempted: bool = True
) -> bool:
    """Queue `worker`'s running job again, its attempt given back; False when the job is no
    longer this worker's (its lease went to another attempt, or it ended). `preempted`: the
    worker stopped (the event reads `preempted: <reason>`); else `reason` is the event."""
    job = get_job(session, job_id, for_update=True)
    if job.status is not JobStatus.running or job.worker != worker:
        return False
    usage.give_back(session, job_id, worker)  # its run stays, charged, but not an attempt
    transition(job, JobStatus.queued, f"{PREEMPTED}: {reason}" if preempted else reason, worker)
    job.attempts = max(0, job.attempts - 1)
    job.worker = None
    job.lease_expires_at = None
    job.stop_requested_for = None  # a preemption asked for, now done
    events.job_preempted(session, job, f"{PREEMPTED}: {reason}")
    return True
