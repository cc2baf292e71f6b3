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
replaced at once either. A pass reads the waiting jobs and the live workers once, as rows
(its cost grows with the fleet, never with the fleet times the queue: `preemption_match.py`
matches them); it loads only the jobs it asks. Callers own the transaction; nothing here
commits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, or_, select, text
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import queue_repository as queue
from archsearch.jobs.domain.jobs.metrics_repository import heartbeat_cutoff
from archsearch.jobs.domain.jobs.preemption_match import Slot, Waiting, choose_victims
from archsearch.jobs.domain.jobs.scheduler import full_owners_and_teams
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


def plan_preemptions(session: Session, settings: Settings) -> list[Preemption]:
    """Ask the fewest running jobs to stop so that every waiting job of at least
    `settings.preemption_priority` can start; returns the stops asked now."""
    if not _take_tick_lock(session):
        return []  # another worker's tick is deciding
    waiting = _waiting_jobs(session, settings, PRIORITY_LEVELS[settings.preemption_priority])
    if not waiting:
        return []
    awaited = _victims_on_their_way(session)
    chosen = choose_victims(waiting, _slots(session, settings), awaited)
    asked = [Preemption(job.id, victim) for job, victim in chosen]
    _request_stops(session, asked, settings)
    return asked


def _victims_on_their_way(session: Session) -> set[uuid.UUID]:
    """The jobs a running job is stopping for, its lease alive (its worker may be dead: the
    lease, not the heartbeat, says when the job is given up). At most one per worker."""
    now = utcnow()
    query = select(Job.stop_requested_for).where(
        Job.status == JobStatus.running,
        Job.stop_requested_for.is_not(None),
        or_(Job.lease_expires_at.is_(None), Job.lease_expires_at > now),
    )
    return {job_id for job_id in session.scalars(query) if job_id is not None}


def _take_tick_lock(session: Session) -> bool:
    if not queue.is_postgresql(session):
        return True  # SQLite: one process
    lock = text("SELECT pg_try_advisory_xact_lock(:key)")
    return bool(session.scalar(lock, {"key": PREEMPTION_LOCK}))


def _waiting_jobs(session: Session, settings: Settings, level: int) -> list[Waiting]:
    """Queued jobs that may preempt, in scheduler order, leaving out those a quota holds:
    a free worker would not start them either."""
    per_user, per_team = queue.running_counts(session)
    full_users, full_teams = full_owners_and_teams(session, settings, per_user, per_team)
    full_users |= queue.paused(session, User)
    held = full_teams | queue.paused(session, Team) | quota.held_teams(session)
    query = (
        select(Job.id, Job.priority, Job.device, Job.min_gpu_memory_gb, Job.victim_asked_until)
        .where(Job.status == JobStatus.queued, Job.priority >= level, ~Job.cancel_requested)
        .where(or_(Job.owner_id.is_(None), Job.owner_id.not_in(full_users)))
        .where(or_(Job.team_id.is_(None), Job.team_id.not_in(held)))
        .order_by(Job.priority.desc(), Job.created_at, Job.id)
    )
    return [Waiting(*row) for row in session.execute(query)]


def _slots(session: Session, settings: Settings) -> list[Slot]:
    """Every live worker with its running job, as rows. A job's `worker` says where it runs;
    a worker row's `current_job_id` may lag behind (a first claim can commit before the new
    process's row exists)."""
    since = heartbeat_cutoff(utcnow(), settings.lease_seconds)
    running = and_(Job.worker == WorkerRecord.name, Job.status == JobStatus.running)
    query = (
        select(WorkerRecord.name, WorkerRecord.device, WorkerRecord.gpu_memory_gb)
        .add_columns(Job.id, Job.priority, Job.created_at, Job.stop_requested_for)
        .outerjoin(Job, running)
        .where(WorkerRecord.heartbeat_at >= since)
        .order_by(WorkerRecord.name, Job.created_at.desc())
    )
    slots: dict[str, Slot] = {}
    for name, device, memory, job_id, priority, created_at, stopping_for in session.execute(query):
        if name not in slots:  # one job per worker, its newest, should a stale row linger
            busy = dict(job_id=job_id, priority=priority or 0, created_at=created_at)
            slots[name] = Slot(len(slots), device, memory, stop_requested_for=stopping_for, **busy)
    return list(slots.values())


def _request_stops(session: Session, asked: list[Preemption], settings: Settings) -> None:
    """Name each waiting job on its victim, and say so in both jobs' events."""
    if not asked:
        return  # most passes: every urgent job has its worker on its way
    ids = [each.job_id for each in asked] + [each.victim_id for each in asked]
    jobs = {job.id: job for job in session.scalars(select(Job).where(Job.id.in_(ids)))}
    until = utcnow() + timedelta(seconds=2 * settings.lease_seconds)
    for each in asked:
        job, victim = jobs[each.job_id], jobs[each.victim_id]
        victim.stop_requested_for = job.id
        job.victim_asked_until = until
        needs = f"job {job.id} ({priority_name(job.priority)} priority) needs its worker"
        session.add(_event(victim, f"preemption asked: {needs}; stopping at a checkpoint"))
        low = priority_name(victim.priority)
        session.add(_event(job, f"preempting job {victim.id} ({low} priority) to start"))


def _event(job: Job, reason: str) -> JobEvent:
    """An event that changes no status."""
    status = JobStatus(job.status).value
    return JobEvent(job_id=job.id, from_status=status, to_status=status, reason=reason, actor=ACTOR)


def stop_requested_for(session: Session, job_id: uuid.UUID) -> uuid.UUID | None:
    """The waiting job that needs this running job's worker, if the scheduler asked."""
    return session.scalar(select(Job.stop_requested_for).where(Job.id == job_id))
