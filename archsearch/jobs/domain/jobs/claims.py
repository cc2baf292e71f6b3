"""Claims, leases and requeue: who runs a job now, for how long, and how it comes back.

A claim takes the job row under a lock (running, attempt + 1, a lease); a live worker renews
its lease; a lost one's job is found by its expired lease and handed back to the queue.
Callers own the transaction; nothing here commits.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.jobs.repository import get_job
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.domain.usage import repository as usage
from archsearch.schemas.jobs import JobStatus


class Claim(enum.Enum):
    claimed = "claimed"
    terminal = "terminal"  # already finished: the message is a late duplicate
    held = "held"  # a live worker holds the lease
    exhausted = "exhausted"  # too many attempts: the job was failed


def claim_job(
    session: Session,
    job_id: uuid.UUID,
    worker: str,
    lease_seconds: float,
    max_attempts: int,
    *,
    has_checkpoint: bool = False,
) -> Claim:
    """Take the job for `worker` under a row lock: running, attempt + 1, a fresh lease."""
    job = get_job(session, job_id, for_update=True)
    now = utcnow()
    if job.status.terminal:
        return Claim.terminal
    if job.status is JobStatus.running and lease_alive(job, now):
        return Claim.held
    if job.cancel_requested:
        transition(job, JobStatus.cancelled, "cancelled while its worker was lost", "system")
        return Claim.terminal
    if job.attempts >= max_attempts:
        job.error = (
            f"the job was started {job.attempts} times and its worker was lost each time "
            "(killed, out of memory or restarted); it was not retried again. Check the "
            "worker logs, reduce the batch size or model size, and resubmit."
        )
        transition(job, JobStatus.failed, "attempts exhausted", "system")
        return Claim.exhausted
    reason = (
        "started" if job.attempts == 0 else f"attempt {job.attempts + 1} (previous run interrupted)"
    )
    if has_checkpoint:
        reason += "; resuming from checkpoint"
    transition(job, JobStatus.running, reason, worker)
    job.attempts += 1
    job.worker = worker
    job.lease_expires_at = now + timedelta(seconds=lease_seconds)
    return Claim.claimed


def lease_alive(job: Job, now: datetime) -> bool:
    return job.lease_expires_at is not None and as_utc(job.lease_expires_at) > now


def renew_lease(session: Session, job_id: uuid.UUID, worker: str, lease_seconds: float) -> bool:
    """Extend the lease if `worker` still holds the job; False means another attempt owns it."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker == worker, Job.status == JobStatus.running)
        # `updated_at` stays: it is when what the job shows last changed, and a renewal
        # changes nothing shown (so it notifies no API process either: migration 0020).
        .values(
            lease_expires_at=utcnow() + timedelta(seconds=lease_seconds),
            updated_at=Job.updated_at,
        )
    )
    renewed = bool(result.rowcount)  # type: ignore[attr-defined]
    if renewed:
        usage.touch_attempt(session, job_id, worker)
    return renewed


def requeue_job(session: Session, job_id: uuid.UUID, reason: str, actor: str = "system") -> Job:
    job = get_job(session, job_id, for_update=True)
    transition(job, JobStatus.queued, reason, actor)
    job.lease_expires_at = None
    job.worker = None
    job.stop_requested_for = None  # the run that was asked to stop is over
    return job


def expired_running_jobs(session: Session) -> list[uuid.UUID]:
    """Running jobs whose worker stopped renewing the lease."""
    query = select(Job.id).where(Job.status == JobStatus.running, Job.lease_expires_at < utcnow())
    return list(session.scalars(query))
