"""The job state machine: queued -> running -> succeeded | failed | cancelled.

A running job may also go back to `queued` when its worker died (lease expired) or a
transient infrastructure error interrupted it. Every transition is recorded as an event;
a terminal one also goes to the webhook outbox, in the same transaction.
"""

from __future__ import annotations

from sqlalchemy.orm import object_session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.errors import InvalidTransition
from archsearch.jobs.domain.tables import Job, JobEvent, JobStatus
from archsearch.jobs.domain.webhooks import events

ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.queued: frozenset({JobStatus.running, JobStatus.cancelled, JobStatus.failed}),
    JobStatus.running: frozenset(
        {
            JobStatus.succeeded,
            JobStatus.failed,
            JobStatus.cancelled,
            JobStatus.queued,
            JobStatus.running,
        }  # running -> running: a new attempt takes over an expired lease
    ),
    JobStatus.succeeded: frozenset(),
    JobStatus.failed: frozenset(),
    JobStatus.cancelled: frozenset(),
}


def transition(job: Job, to: JobStatus, reason: str, actor: str | None = None) -> None:
    """Move `job` to `to`, recording an event with who did it; raises InvalidTransition."""
    current = JobStatus(job.status)
    if to not in ALLOWED[current]:
        raise InvalidTransition(f"job {job.id} is {current.value}; it cannot become {to.value}")
    job.events.append(
        JobEvent(from_status=current.value, to_status=to.value, reason=reason, actor=actor)
    )
    job.status = to
    now = utcnow()
    if to is JobStatus.running and job.started_at is None:
        job.started_at = now
    if to.terminal:
        job.finished_at = now
        job.lease_expires_at = None
        if to is JobStatus.succeeded:
            job.progress = 1.0
        # Callers set the job's error and metrics before the transition: the event says them.
        if (session := object_session(job)) is not None:
            events.job_outcome(session, job, current.value, reason)
