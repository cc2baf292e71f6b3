"""PostgreSQL decides who runs next; queue messages only wake workers.

Order: priority first, then fair share (among jobs of equal priority, the user with fewer
running jobs goes first), then first come first served. Quotas cap running jobs per user and
per team. A claim is one transaction under a claim lock, so quotas hold exactly with many
workers claiming at once; `FOR UPDATE SKIP LOCKED` keeps claimers off rows another holds.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, or_, select, text
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.repository import Claim, claim_job
from archsearch.jobs.domain.tables import Job, JobStatus, WorkerRecord, utcnow
from archsearch.jobs.platform.settings import Settings

CANDIDATE_WINDOW = 64  # jobs of the top of the queue among which fair share picks
_CLAIM_LOCK_KEY = 0x61726368  # "arch": one advisory lock serialises claims cluster-wide
_local_claim_lock = threading.Lock()  # SQLite (one process): the same, within the process


@dataclass(frozen=True)
class Offer:
    """What a worker process can run."""

    device: str  # cpu | cuda | any (the embedded runner takes every job)
    gpu_memory_gb: float | None = None

    @property
    def accepts(self) -> tuple[str, ...]:
        return {"cuda": ("cuda", "auto"), "cpu": ("cpu", "auto")}.get(
            self.device, ("cpu", "cuda", "auto")
        )


def _running_counts(session: Session) -> tuple[Counter[uuid.UUID], Counter[uuid.UUID]]:
    rows = session.execute(
        select(Job.owner_id, Job.team_id).where(Job.status == JobStatus.running)
    ).all()
    return Counter(r.owner_id for r in rows if r.owner_id), Counter(
        r.team_id for r in rows if r.team_id
    )


def _limits(
    session: Session, model: type[User] | type[Team], ids: set[uuid.UUID], default: int | None
) -> dict[uuid.UUID, int]:
    limits = {
        row.id: row.max_running
        for row in session.execute(select(model.id, model.max_running).where(model.id.in_(ids)))
    }
    return {i: limit for i in ids if (limit := limits.get(i) or default) is not None}


def full_owners_and_teams(
    session: Session, settings: Settings, per_user: Counter[uuid.UUID], per_team: Counter[uuid.UUID]
) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
    """Users and teams whose quota of running jobs is used up, given the running counts."""
    user_limits = _limits(session, User, set(per_user), settings.max_running_per_user)
    team_limits = _limits(session, Team, set(per_team), settings.max_running_per_team)
    return (
        {u for u, n in per_user.items() if u in user_limits and n >= user_limits[u]},
        {t for t, n in per_team.items() if t in team_limits and n >= team_limits[t]},
    )


def _candidates(
    session: Session, offer: Offer, full_users: set[uuid.UUID], full_teams: set[uuid.UUID]
) -> list[Job]:
    query = (
        select(Job)
        .where(Job.status == JobStatus.queued, Job.device.in_(offer.accepts))
        .order_by(Job.priority.desc(), Job.created_at, Job.id)
        .limit(CANDIDATE_WINDOW)
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
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return list(session.scalars(query))


def pick_fairly(candidates: list[Job], running_per_user: Counter[uuid.UUID]) -> Job | None:
    """Highest priority; among those, the owner with fewest running jobs; then the oldest."""
    if not candidates:
        return None
    top = candidates[0].priority
    equals = [job for job in candidates if job.priority == top]
    return min(equals, key=lambda job: running_per_user.get(job.owner_id, 0) if job.owner_id else 0)


def _serialise_claims(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CLAIM_LOCK_KEY})


def claim_next(
    session: Session,
    worker: str,
    offer: Offer,
    settings: Settings,
    has_checkpoint: Callable[[uuid.UUID], bool] = lambda _: False,
) -> uuid.UUID | None:
    """Claim the next job this worker may run, or None. Call inside a transaction."""
    with _local_claim_lock:
        _serialise_claims(session)
        per_user, per_team = _running_counts(session)
        full_users, full_teams = full_owners_and_teams(session, settings, per_user, per_team)
        job = pick_fairly(_candidates(session, offer, full_users, full_teams), per_user)
        if job is None:
            return None
        outcome = claim_job(
            session,
            job.id,
            worker,
            settings.lease_seconds,
            settings.max_attempts,
            has_checkpoint=has_checkpoint(job.id),
        )
        session.flush()
        return job.id if outcome is Claim.claimed else None


def live_workers(session: Session, settings: Settings) -> list[WorkerRecord]:
    since = utcnow() - timedelta(seconds=settings.lease_seconds)
    return list(session.scalars(select(WorkerRecord).where(WorkerRecord.heartbeat_at >= since)))


def queue_position(session: Session, job: Job) -> int:
    """1 for the next job to run; counts queued jobs ahead in scheduler order."""
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
    return int(session.scalar(ahead) or 0) + 1


def pending_reason(
    session: Session, job: Job, settings: Settings, position: int | None = None
) -> str:
    """Why a queued job waits, in words a user can act on (`position`: if already known)."""
    per_user, per_team = _running_counts(session)
    full_users, full_teams = full_owners_and_teams(session, settings, per_user, per_team)
    if job.owner_id in full_users:
        limit = _limits(session, User, {job.owner_id}, settings.max_running_per_user)[job.owner_id]
        return f"user quota {per_user[job.owner_id]}/{limit} in use"
    if job.team_id in full_teams:
        limit = _limits(session, Team, {job.team_id}, settings.max_running_per_team)[job.team_id]
        return f"team quota {per_team[job.team_id]}/{limit} in use"
    workers = live_workers(session, settings)
    if job.device == "cuda" and not any(w.device == "cuda" for w in workers):
        return "waiting for a worker with a CUDA device"
    if not workers and not settings.embedded:
        return "no worker is running"
    higher = (
        session.scalar(
            select(func.count())
            .select_from(Job)
            .where(Job.status == JobStatus.queued, Job.priority > job.priority)
        )
        or 0
    )
    if higher:
        return f"{higher} higher-priority job{'s' if higher > 1 else ''} ahead"
    ahead = (position or queue_position(session, job)) - 1
    if ahead:
        return f"{ahead} job{'s' if ahead > 1 else ''} ahead"
    return "waiting for a free worker"


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
