"""The job state machine: queued -> running -> succeeded | failed | cancelled | pruned.

A queued study job may also end `pruned` without running: its arm's first seed was stopped
by the study's pruner (`studies/pruning.py`).

A running job may also go back to `queued` when its worker died (lease expired) or a
transient infrastructure error interrupted it. Every transition is recorded as an event;
a terminal one also goes to the webhook outbox, and every attempt's device time to
`job_attempts`, in the same transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session, object_session

from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.errors import InvalidTransition
from archsearch.jobs.domain.tables import Job, JobEvent
from archsearch.jobs.domain.usage import repository as usage
from archsearch.jobs.domain.webhooks import events
from archsearch.schemas.jobs import JobStatus

ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.queued: frozenset(
        {JobStatus.running, JobStatus.cancelled, JobStatus.failed, JobStatus.pruned}
    ),
    JobStatus.running: frozenset(
        {
            JobStatus.succeeded,
            JobStatus.failed,
            JobStatus.cancelled,
            JobStatus.pruned,  # a study's pruner stopped the trial at an epoch boundary
            JobStatus.queued,
            JobStatus.running,
        }  # running -> running: a new attempt takes over an expired lease
    ),
    JobStatus.succeeded: frozenset(),
    JobStatus.failed: frozenset(),
    JobStatus.cancelled: frozenset(),
    JobStatus.pruned: frozenset(),
}


def transition(job: Job, to: JobStatus, reason: str, actor: str | None = None) -> None:
    """Move `job` to `to`, recording an event with who did it; raises InvalidTransition."""
    current = JobStatus(job.status)
    if to not in ALLOWED[current]:
        raise InvalidTransition(f"job {job.id} is {current.value}; it cannot become {to.value}")
    now = utcnow()
    # The event's time is the transition's: the attempt's usage starts and ends at it too.
    job.events.append(
        JobEvent(from_status=current.value, to_status=to.value, reason=reason, actor=actor, at=now)
    )
    session = object_session(job)
    if session is not None:
        _record_usage(session, job, current, to, actor, now)
    job.status = to
    if to is JobStatus.running and job.started_at is None:
        job.started_at = now
    if to.terminal:
        job.finished_at = now
        job.lease_expires_at = None
        if to is JobStatus.succeeded:
            job.progress = 1.0
        # Callers set the job's error and metrics before the transition: the event says them.
        if session is not None:
            events.job_outcome(session, job, current.value, reason)


def _record_usage(
    session: Session, job: Job, current: JobStatus, to: JobStatus, actor: str | None, now: datetime
) -> None:
    """An attempt starts with every move to running and ends with every move away from it
    (a takeover is both). A live lease means its worker ends it now; an expired one, that
    the worker was lost, so the attempt ends at its last renewal."""
    if current is JobStatus.running:
        lost = job.lease_expires_at is not None and as_utc(job.lease_expires_at) <= now
        usage.close_attempt(session, job.id, None if lost else now)
    if to is JobStatus.running:
        usage.open_attempt(session, job, actor or "unknown", now)
