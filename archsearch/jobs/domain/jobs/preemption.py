"""Priority preemption (a setting, off by default): a queued job of high enough priority that
finds every worker able to run it busy takes the worker of the running job of the lowest
lower priority, the youngest among equals.

The decision runs in the scheduler's tick (`runtime/reaper.py`), one tick at a time across
workers (a transaction-level advisory lock on PostgreSQL). It only asks: it names the waiting
job in the victim's `stop_requested_for`; the victim's worker reads it at its next lease
renewal and stops the job as a SIGTERM does (at its next checkpoint, handed back to the queue
without spending an attempt, `handback.py`), then claims again, and the scheduler's order
gives it the waiting job. Never a job of equal or higher priority; never more victims than
waiting jobs that could start: a free worker, or a victim already stopping, counts as a
worker on its way. One victim per waiting job, whatever dies during a hand-back: a victim
stopping for a job counts as on its way while its lease lives, even once its worker has gone
silent, and the waiting job remembers (`victim_asked_until`, two leases: one to stop, one
for its worker to claim) so that a victim handed back by a worker that then died is not
replaced at once either. Callers own the transaction; nothing here commits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, select, text
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.jobs import queue_repository as queue
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.jobs.scheduler import full_owners_and_teams, live_workers
from archsearch.jobs.domain.tables import Job, JobEvent, WorkerRecord
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import PRIORITY_LEVELS, JobStatus, priority_name

PREEMPTION_LOCK = 0x7072_6565_6D70_7431  # one preemption tick at a time, across workers
ACTOR = "scheduler"


@dataclass(frozen=True)
class Preemption:
    job_id: uuid.UUID  # the waiting job
    victim_id: uuid.UUID  # the running job asked to stop for it


@dataclass
class Slot:
    """A live worker and the job it runs (None: free, or between two jobs)."""

    worker: WorkerRecord
    job: Job | None


def plan_preemptions(session: Session, settings: Settings) -> list[Preemption]:
    """Ask the fewest running jobs to stop so that every waiting job of at least
    `settings.preemption_priority` can start; returns the stops asked now."""
    if not _take_tick_lock(session):
        return []  # another worker's tick is deciding
    waiting = _waiting_jobs(session, settings, PRIORITY_LEVELS[settings.preemption_priority])
    if not waiting:
        return []
    slots, asked = _slots(session, settings), []
    awaited = _victims_on_their_way(session, [job.id for job in waiting])
    for job in waiting:
        slot = _slot_on_its_way(job, slots)
        if slot is None and _still_awaits_its_victim(job, awaited):
            continue  # its victim's worker went silent mid-hand-back: no second victim yet
        if slot is None and (slot := _victim_for(job, slots)) is not None:
            assert slot.job is not None, "a victim runs a job"
            asked.append(_request_stop(slot.job, job, settings))
        if slot is not None:
            slots.remove(slot)
    return asked


def _victims_on_their_way(session: Session, waiting: list[uuid.UUID]) -> set[uuid.UUID]:
    """The waiting jobs a running job is stopping for, its lease alive (its worker may be
    dead: the lease, not the heartbeat, says when the job is given up)."""
    now = utcnow()
    query = select(Job.stop_requested_for).where(
        Job.status == JobStatus.running,
        Job.stop_requested_for.in_(waiting),
        or_(Job.lease_expires_at.is_(None), Job.lease_expires_at > now),
    )
    return {job_id for job_id in session.scalars(query) if job_id is not None}


def _still_awaits_its_victim(job: Job, awaited: set[uuid.UUID]) -> bool:
    asked_until = job.victim_asked_until
    return job.id in awaited or (asked_until is not None and as_utc(asked_until) > utcnow())


def _take_tick_lock(session: Session) -> bool:
    if not queue.is_postgresql(session):
        return True  # SQLite: one process
    lock = text("SELECT pg_try_advisory_xact_lock(:key)")
    return bool(session.scalar(lock, {"key": PREEMPTION_LOCK}))


def _waiting_jobs(session: Session, settings: Settings, level: int) -> list[Job]:
    """Queued jobs that may preempt, in scheduler order, leaving out those a quota holds:
    a free worker would not start them either."""
    per_user, per_team = queue.running_counts(session)
    full_users, full_teams = full_owners_and_teams(session, settings, per_user, per_team)
    full_users |= queue.paused(session, User)
    held = full_teams | queue.paused(session, Team) | quota.held_teams(session)
    query = (
        select(Job)
        .where(Job.status == JobStatus.queued, Job.priority >= level, ~Job.cancel_requested)
        .where(or_(Job.owner_id.is_(None), Job.owner_id.not_in(full_users)))
        .where(or_(Job.team_id.is_(None), Job.team_id.not_in(held)))
        .order_by(Job.priority.desc(), Job.created_at, Job.id)
    )
    return list(session.scalars(query))


def _slots(session: Session, settings: Settings) -> list[Slot]:
    # A job's `worker` says where it runs; a worker row's `current_job_id` may lag behind
    # (a first claim can commit before the new process's row exists).
    workers = live_workers(session, settings)
    names = [w.name for w in workers]
    running = session.scalars(
        select(Job).where(Job.worker.in_(names), Job.status == JobStatus.running)
    )
    jobs = {job.worker: job for job in running}
    return [Slot(w, jobs.get(w.name)) for w in workers]


def can_run(worker: WorkerRecord, job: Job) -> bool:
    """Whether the scheduler would give `job` to `worker` (its device and GPU memory)."""
    if job.device not in Offer(worker.device, worker.gpu_memory_gb).accepts:
        return False
    if job.min_gpu_memory_gb is None:
        return True
    if worker.device == "cpu":
        return False
    return worker.gpu_memory_gb is None or job.min_gpu_memory_gb <= worker.gpu_memory_gb


def _slot_on_its_way(job: Job, slots: list[Slot]) -> Slot | None:
    """A worker `job` will get without a new preemption: one stopping its job for `job`,
    else a free one, else one stopping for a job that no longer waits."""
    fits = [s for s in slots if can_run(s.worker, job)]
    for wanted in (
        lambda s: s.job is not None and s.job.stop_requested_for == job.id,
        lambda s: s.job is None,
        lambda s: s.job is not None and s.job.stop_requested_for is not None,
    ):
        if found := next((s for s in fits if wanted(s)), None):
            return found
    return None


def _victim_for(job: Job, slots: list[Slot]) -> Slot | None:
    """The slot running the job of the lowest priority below `job`'s, the youngest first."""
    lower = [
        s
        for s in slots
        if s.job is not None
        and s.job.stop_requested_for is None
        and s.job.priority < job.priority
        and can_run(s.worker, job)
    ]
    if not lower:
        return None
    return min(lower, key=lambda s: _victim_rank(s.job))


def _victim_rank(job: Job | None) -> tuple[int, float]:
    assert job is not None, "only busy slots are ranked"
    return job.priority, -as_utc(job.created_at).timestamp()


def _request_stop(victim: Job, job: Job, settings: Settings) -> Preemption:
    """Name `job` on `victim`, and say so in both jobs' events."""
    victim.stop_requested_for = job.id
    job.victim_asked_until = utcnow() + timedelta(seconds=2 * settings.lease_seconds)
    needs = f"job {job.id} ({priority_name(job.priority)} priority) needs its worker"
    victim.events.append(_event(victim, f"preemption asked: {needs}; stopping at a checkpoint"))
    low = priority_name(victim.priority)
    job.events.append(_event(job, f"preempting job {victim.id} ({low} priority) to start"))
    return Preemption(job.id, victim.id)


def _event(job: Job, reason: str) -> JobEvent:
    """An event that changes no status."""
    status = JobStatus(job.status).value
    return JobEvent(from_status=status, to_status=status, reason=reason, actor=ACTOR)


def stop_requested_for(session: Session, job_id: uuid.UUID) -> uuid.UUID | None:
    """The waiting job that needs this running job's worker, if the scheduler asked."""
    return session.scalar(select(Job.stop_requested_for).where(Job.id == job_id))
