"""The SQL the scheduler needs: running counts, quotas, the eligible head of the queue,
positions in it, and the claim lock. The rules (fair share, what to tell a waiting user)
stay in `scheduler.py`. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

from sqlalchemy import exists, func, literal, or_, select, text, union_all
from sqlalchemy.orm import InstrumentedAttribute, Session

from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.tables import Job, RunningCount
from archsearch.schemas.jobs import JobStatus

_CLAIM_LOCK_KEY = 0x61726368  # "arch": one advisory lock serialises claims cluster-wide


def is_postgresql(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def lock_claims(session: Session) -> None:
    """Hold the cluster-wide claim lock until the transaction ends (PostgreSQL only)."""
    if is_postgresql(session):
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CLAIM_LOCK_KEY})


def running_counts(
    session: Session, owner_id: uuid.UUID | None = None, team_id: uuid.UUID | None = None
) -> tuple[Counter[uuid.UUID], Counter[uuid.UUID]]:
    """Running jobs per owner and per team (with `owner_id` / `team_id`: only theirs).

    PostgreSQL: the shards of `running_counts`, kept by the database, summed.
    SQLite: counted with one aggregate per kind (one process, few jobs)."""
    only = {owner_id, team_id} - {None} if owner_id or team_id else None
    if not is_postgresql(session):
        return _count_running(session, Job.owner_id, only), _count_running(
            session, Job.team_id, only
        )
    query = select(RunningCount.kind, RunningCount.subject_id, func.sum(RunningCount.running))
    if only is not None:
        query = query.where(RunningCount.subject_id.in_(only))
    per_kind: dict[str, Counter[uuid.UUID]] = {"user": Counter(), "team": Counter()}
    for kind, subject, running in session.execute(
        query.group_by(RunningCount.kind, RunningCount.subject_id)
    ):
        if running:
            per_kind[kind][subject] = int(running)
    return per_kind["user"], per_kind["team"]


def _count_running(
    session: Session, column: InstrumentedAttribute[uuid.UUID | None], only: set[Any] | None
) -> Counter[uuid.UUID]:
    query = select(column, func.count()).where(Job.status == JobStatus.running, column.is_not(None))
    if only is not None:
        query = query.where(column.in_(only))
    rows = session.execute(query.group_by(column))
    return Counter({subject: n for subject, n in rows if subject is not None})


def max_running(
    session: Session, model: type[User] | type[Team], ids: set[uuid.UUID]
) -> dict[uuid.UUID, int | None]:
    """The stored running-job quota of each user (or team); None: the server default."""
    query = select(model.id, model.max_running).where(model.id.in_(ids))
    return {row.id: row.max_running for row in session.execute(query)}


def paused(session: Session, model: type[User] | type[Team]) -> set[uuid.UUID]:
    """Users (or teams) whose quota is 0: none of their jobs starts."""
    return set(session.scalars(select(model.id).where(model.max_running == 0)))


def eligible_queued_jobs(
    session: Session,
    offer: Offer,
    full_users: set[uuid.UUID],
    full_teams: set[uuid.UUID],
    window: int,
) -> list[Job]:
    """The first `window` queued jobs in scheduler order that `offer` may run (SQLite's
    claim; PostgreSQL's is `claim_sql.pick_and_take`)."""
    query = (
        select(Job)
        .where(Job.status == JobStatus.queued, Job.device.in_(offer.accepts))
        .order_by(Job.priority.desc(), Job.created_at, Job.id)
        .limit(window)
    )
    if offer.device == "cpu":
        query = query.where(Job.min_gpu_memory_gb.is_(None))  # asks for GPU memory: not here
    elif offer.device == "cuda" and offer.gpu_memory_gb is not None:
        query = query.where(
            or_(Job.min_gpu_memory_gb.is_(None), Job.min_gpu_memory_gb <= offer.gpu_memory_gb)
        )
    if full_users:
        query = query.where(or_(Job.owner_id.is_(None), Job.owner_id.not_in(full_users)))
    if full_teams:
        query = query.where(or_(Job.team_id.is_(None), Job.team_id.not_in(full_teams)))
    return list(session.scalars(query))


JOB_DEVICES = ("cpu", "cuda", "auto")  # what a job may ask for (`Job.device`)


def devices_waiting_since(session: Session, seconds: float) -> set[str]:
    """Devices asked for by jobs queued longer than `seconds`: one probe per device of
    `ix_jobs_queued_device_created_at` (its first entry answers), whatever the queue's length."""
    cutoff = utcnow() - timedelta(seconds=seconds)
    probes = [
        select(literal(device)).where(
            exists().where(
                Job.status == JobStatus.queued, Job.device == device, Job.created_at < cutoff
            )
        )
        for device in JOB_DEVICES
    ]
    return set(session.scalars(union_all(*probes)))


def queued_ahead_of(session: Session, job: Job) -> int:
    """Queued jobs before `job` in scheduler order (priority, then age, then id)."""
    ahead = (
        select(func.count())
        .select_from(Job)
        .where(
            Job.status == JobStatus.queued,
            or_(
                Job.priority > job.priority,
                (Job.priority == job.priority)
                & (
                    (Job.created_at < job.created_at)
                    | ((Job.created_at == job.created_at) & (Job.id < job.id))
                ),
            ),
        )
    )
    return int(session.scalar(ahead) or 0)


def queued_with_higher_priority(session: Session, priority: int) -> int:
    query = (
        select(func.count())
        .select_from(Job)
        .where(Job.status == JobStatus.queued, Job.priority > priority)
    )
    return int(session.scalar(query) or 0)


def waiting_jobs(session: Session, team_id: uuid.UUID | None, limit: int = 200) -> list[Job]:
    """Queued jobs in the order the scheduler considers them."""
    query = select(Job).where(Job.status == JobStatus.queued)
    if team_id is not None:
        query = query.where(Job.team_id == team_id)
    return list(
        session.scalars(query.order_by(Job.priority.desc(), Job.created_at, Job.id).limit(limit))
    )


def running_jobs(session: Session, team_id: uuid.UUID | None) -> list[Job]:
    query = select(Job).where(Job.status == JobStatus.running)
    if team_id is not None:
        query = query.where(Job.team_id == team_id)
    return list(session.scalars(query.order_by(Job.started_at)))
