"""PostgreSQL decides who runs next; queue messages only wake workers.

Order: priority first, then fair share (among jobs of equal priority, the user with fewer
running jobs goes first), then first come first served. Quotas cap running jobs per user and
per team. On PostgreSQL a claim is usually one statement (`claim_sql.py`): claimers never
wait on each other (`FOR UPDATE SKIP LOCKED`), and running counts come from a table the
database keeps. Claims that count against a quota finish under one claim lock, with the
counts read again under it, so quotas hold exactly with many workers claiming at once.
The rules live here; their SQL lives in `claim_sql.py` and `queue_repository.py`, and the
autoscaler's count of what a claim would hand out, built from the claim's own text, in
`claimable.py`.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import claim_sql, worker_repository
from archsearch.jobs.domain.jobs import queue_repository as queue
from archsearch.jobs.domain.jobs.claims import Claim, claim_job
from archsearch.jobs.domain.jobs.devices import missing_device_reason
from archsearch.jobs.domain.jobs.metrics_repository import heartbeat_cutoff
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.tables import Job, WorkerRecord
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus

CANDIDATE_WINDOW = 64  # jobs of the top of the queue among which fair share picks
MAX_PICKS = 16  # picks per claim: a job found finished, exhausted or over quota is passed
_local_claim_lock = threading.Lock()  # SQLite (one process): the claim lock, within the process


def _limits(
    session: Session, model: type[User] | type[Team], ids: set[uuid.UUID], default: int | None
) -> dict[uuid.UUID, int]:
    # A stored 0 is a quota (paused), not "unset": only None falls back to the default.
    stored = queue.max_running(session, model, ids)
    limits = {i: default if stored.get(i) is None else stored[i] for i in ids}
    return {i: limit for i, limit in limits.items() if limit is not None}


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


def _running_counts_of(session: Session, job: Job) -> tuple[Counter[uuid.UUID], Counter[uuid.UUID]]:
    """The job's owner's and team's running jobs, 0 included: a quota of 0 is full."""
    per_user, per_team = queue.running_counts(session, job.owner_id, job.team_id)
    if job.owner_id is not None:
        per_user[job.owner_id] += 0
    if job.team_id is not None:
        per_team[job.team_id] += 0
    return per_user, per_team


def pick_fairly(candidates: list[Job], running_per_user: Counter[uuid.UUID]) -> Job | None:
    """Highest priority; among those, the owner with fewest running jobs; then the oldest."""
    if not candidates:
        return None
    top = candidates[0].priority
    equals = [job for job in candidates if job.priority == top]
    return min(equals, key=lambda job: running_per_user.get(job.owner_id, 0) if job.owner_id else 0)


def claim_next(
    session: Session,
    worker: str,
    offer: Offer,
    settings: Settings,
    has_checkpoint: Callable[[uuid.UUID], bool] = lambda _: False,
) -> uuid.UUID | None:
    """Claim the next job this worker may run, or None. Call inside a transaction."""
    if not queue.is_postgresql(session):
        with _local_claim_lock:
            return _claim_in_process(session, worker, offer, settings, has_checkpoint)
    defaults = (settings.max_running_per_user, settings.max_running_per_team)
    for _ in range(MAX_PICKS):
        pick = claim_sql.pick_and_take(
            session, offer, worker, settings.lease_seconds, defaults, CANDIDATE_WINDOW
        )
        if pick is None:
            return None
        if pick.taken:
            return pick.job_id
        if not pick.unlimited:
            # A quota applies: claims that count against one serialise on the claim lock,
            # and the counts are read again under it (another claim may just have filled it).
            queue.lock_claims(session)
            if _at_quota(session, settings, pick.job_id):
                continue  # the next pick leaves that user or team out
        if _take(session, pick.job_id, worker, settings, has_checkpoint):
            return pick.job_id
    return None


def _at_quota(session: Session, settings: Settings, job_id: uuid.UUID) -> bool:
    job = session.get(Job, job_id)
    assert job is not None, "a picked job is locked, so it exists"
    per_user, per_team = _running_counts_of(session, job)
    full_users, full_teams = full_owners_and_teams(session, settings, per_user, per_team)
    return job.owner_id in full_users or job.team_id in full_teams


def _take(
    session: Session,
    job_id: uuid.UUID,
    worker: str,
    settings: Settings,
    has_checkpoint: Callable[[uuid.UUID], bool],
) -> bool:
    """The claim's rules on a picked job (a later attempt, a cancel asked meanwhile)."""
    outcome = claim_job(
        session,
        job_id,
        worker,
        settings.lease_seconds,
        settings.max_attempts,
        has_checkpoint=has_checkpoint(job_id),
    )
    session.flush()
    return outcome is Claim.claimed


def _claim_in_process(
    session: Session,
    worker: str,
    offer: Offer,
    settings: Settings,
    has_checkpoint: Callable[[uuid.UUID], bool],
) -> uuid.UUID | None:
    """SQLite: one process, claims serialised by a lock; the rules applied in Python."""
    for _ in range(MAX_PICKS):
        per_user, per_team = queue.running_counts(session)
        full_users, full_teams = full_owners_and_teams(session, settings, per_user, per_team)
        full_users |= queue.paused(session, User)
        held = full_teams | queue.paused(session, Team) | quota.held_teams(session)
        candidates = queue.eligible_queued_jobs(session, offer, full_users, held, CANDIDATE_WINDOW)
        job = pick_fairly(candidates, per_user)
        if job is None:
            return None
        if _take(session, job.id, worker, settings, has_checkpoint):
            return job.id
    return None


def live_workers(session: Session, settings: Settings) -> list[WorkerRecord]:
    """Workers seen within one lease: a silent one longer than that counts as gone."""
    since = heartbeat_cutoff(utcnow(), settings.lease_seconds)
    return worker_repository.workers_seen_since(session, since)


def queue_position(session: Session, job: Job) -> int:
    """1 for the next job to run; counts queued jobs ahead in scheduler order."""
    return queue.queued_ahead_of(session, job) + 1


def pending_reason(
    session: Session, job: Job, settings: Settings, position: int | None = None
) -> str:
    """Why a queued job waits, in words a user can act on (`position`: if already known)."""
    if reason := _held_or_preempting(session, job):
        return reason
    per_user, per_team = _running_counts_of(session, job)
    full_users, full_teams = full_owners_and_teams(session, settings, per_user, per_team)
    if job.owner_id in full_users:
        limit = _limits(session, User, {job.owner_id}, settings.max_running_per_user)[job.owner_id]
        return f"user quota {per_user[job.owner_id]}/{limit} in use"
    if job.team_id in full_teams:
        limit = _limits(session, Team, {job.team_id}, settings.max_running_per_team)[job.team_id]
        return f"team quota {per_team[job.team_id]}/{limit} in use"
    workers = live_workers(session, settings)
    if (missing := missing_device_reason(session, job, settings, workers)) is not None:
        return missing
    if not workers and not settings.embedded:
        return "no worker is running"
    higher = queue.queued_with_higher_priority(session, job.priority)
    if higher:
        return f"{higher} higher-priority job{'s' if higher > 1 else ''} ahead"
    ahead = (position or queue_position(session, job)) - 1
    if ahead:
        return f"{ahead} job{'s' if ahead > 1 else ''} ahead"
    return "waiting for a free worker"


def _held_or_preempting(session: Session, job: Job) -> str | None:
    """A team over its weekly device-hours, or a running job stopping to free a worker."""
    team = session.get(Team, job.team_id) if job.team_id else None
    if team is not None and team.usage_held_reason:
        return team.usage_held_reason
    victim = session.scalars(
        select(Job).where(Job.stop_requested_for == job.id, Job.status == JobStatus.running)
    ).first()
    if victim is not None:
        return f"preempting job {victim.id}: it stops at its next checkpoint to free a worker"
    return None
