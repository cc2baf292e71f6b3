"""All SQL of device usage. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.tables import Job, WorkerRecord
from archsearch.jobs.domain.usage.tables import JobAttempt

DEVICE_KINDS = ("cpu", "cuda")


def device_of(session: Session, job: Job, worker: str) -> str:
    """The device kind the claiming worker offers; a worker that is not registered (the
    embedded runner) is taken at the job's word, CPU when the job left it to `auto`."""
    record = session.get(WorkerRecord, worker)
    if record is not None and record.device in DEVICE_KINDS:
        return record.device
    return job.device if job.device in DEVICE_KINDS else "cpu"


def open_attempt(session: Session, job: Job, worker: str, at: datetime) -> None:
    # Numbered by the rows already there, not by `job.attempts`: a hand-back gives its
    # attempt back to the job, yet its device time was spent and keeps its own row.
    done = select(func.coalesce(func.max(JobAttempt.attempt), 0)).where(JobAttempt.job_id == job.id)
    session.add(
        JobAttempt(
            job_id=job.id,
            attempt=int(session.scalar(done) or 0) + 1,
            team_id=job.team_id,
            owner_id=job.owner_id,
            method=job.method,
            device=device_of(session, job, worker),
            worker=worker,
            started_at=at,
            last_seen_at=at,
            seconds=0.0,
        )
    )


def close_attempt(session: Session, job_id: uuid.UUID, at: datetime | None) -> None:
    """End the job's open attempt at `at`, or at its last renewal when `at` is None (its
    worker was lost: it held the device no longer than it renewed its lease)."""
    found = session.scalars(
        select(JobAttempt).where(JobAttempt.job_id == job_id, JobAttempt.ended_at.is_(None))
    ).all()
    for attempt in found:
        end = as_utc(attempt.last_seen_at) if at is None else at
        attempt.ended_at = attempt.last_seen_at = end
        attempt.seconds = max(0.0, (end - as_utc(attempt.started_at)).total_seconds())


def set_run_figures(
    session: Session, job_id: uuid.UUID, worker: str, figures: dict[str, Any]
) -> None:
    """Keep what the open run of `worker` used of its device on its row."""
    session.execute(
        update(JobAttempt)
        .where(
            JobAttempt.job_id == job_id, JobAttempt.worker == worker, JobAttempt.ended_at.is_(None)
        )
        .values(figures=figures)
    )


def set_device_share(session: Session, job_id: uuid.UUID, worker: str, share: float) -> None:
    """The open run of `worker` holds `share` of its device (a slot of K: 1/K)."""
    session.execute(
        update(JobAttempt)
        .where(
            JobAttempt.job_id == job_id, JobAttempt.worker == worker, JobAttempt.ended_at.is_(None)
        )
        .values(device_share=share)
    )


def give_back(session: Session, job_id: uuid.UUID, worker: str) -> None:
    """The open run of `worker` is handed back: it no longer counts as one of the job's
    attempts (its device time is still charged)."""
    session.execute(
        update(JobAttempt)
        .where(
            JobAttempt.job_id == job_id, JobAttempt.worker == worker, JobAttempt.ended_at.is_(None)
        )
        .values(given_back=True)
    )


def touch_attempt(session: Session, job_id: uuid.UUID, worker: str) -> None:
    """A lease renewal: the open attempt of `worker` ran until now."""
    now = utcnow()
    open_rows = select(JobAttempt).where(
        JobAttempt.job_id == job_id, JobAttempt.worker == worker, JobAttempt.ended_at.is_(None)
    )
    for attempt in session.scalars(open_rows):
        attempt.last_seen_at = now
        attempt.seconds = max(0.0, (now - as_utc(attempt.started_at)).total_seconds())


def attempts_between(
    session: Session, start: datetime, end: datetime, team_id: uuid.UUID | None
) -> list[tuple[JobAttempt, str | None, str | None]]:
    """Attempts that overlap [start, end), with their team's and owner's names; all teams
    when `team_id` is None."""
    query = (
        select(JobAttempt, Team.name, User.name)
        .outerjoin(Team, Team.id == JobAttempt.team_id)
        .outerjoin(User, User.id == JobAttempt.owner_id)
        .where(JobAttempt.started_at < end, JobAttempt.last_seen_at > start)
        .order_by(JobAttempt.started_at)
    )
    if team_id is not None:
        query = query.where(JobAttempt.team_id == team_id)
    return [(a, team, user) for a, team, user in session.execute(query)]


def seconds_by_team_and_device(session: Session) -> list[tuple[str, str, float]]:
    """Every device-second ever charged (held seconds times the device share), by team name
    ("none" without a team) and device."""
    charged = func.sum(JobAttempt.seconds * JobAttempt.device_share)
    query = (
        select(Team.name, JobAttempt.device, charged)
        .outerjoin(Team, Team.id == JobAttempt.team_id)
        .group_by(Team.name, JobAttempt.device)
    )
    return [
        (team or "none", device, float(total or 0))
        for team, device, total in session.execute(query)
    ]


def job_seconds(session: Session, job_id: uuid.UUID) -> list[JobAttempt]:
    query = select(JobAttempt).where(JobAttempt.job_id == job_id).order_by(JobAttempt.attempt)
    return list(session.scalars(query))
