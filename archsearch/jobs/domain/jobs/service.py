"""Use cases the API calls: each one owns its transaction and what follows the commit."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Sequence

from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.errors import (
    Forbidden,
    InvalidTransition,
    UnofferedDevice,
)
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.jobs.repository import Placement
from archsearch.jobs.domain.jobs.validation import validate_submission
from archsearch.jobs.domain.tables import Job, JobEvent
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import (
    ADMIN_ONLY_PRIORITY_LEVEL,
    PRIORITY_LEVELS,
    TAG_PATTERN,
    JobStatus,
    Priority,
)
from archsearch.specs import JobBase

log = logging.getLogger(__name__)


def placement_for(spec: JobBase, principal: Principal, priority: Priority) -> Placement:
    level = PRIORITY_LEVELS[priority]
    if level >= ADMIN_ONLY_PRIORITY_LEVEL and not principal.is_admin:
        raise Forbidden(f"priority {priority!r} is for admins; use low, normal or high")
    resources = spec.resources
    return Placement(
        actor=principal.name,
        owner_id=principal.user_id,
        team_id=principal.team_id,
        priority=level,
        device=resources.device,
        min_gpu_memory_gb=resources.min_gpu_memory_gb,
    )


def require_offered_device(enqueuer: Enqueuer, spec: JobBase) -> None:
    """Refuse a job no worker can ever run (CUDA on an embedded server without it) instead of
    queueing it for ever."""
    device = spec.resources.device
    if not enqueuer.can_ever_offer(device):
        raise UnofferedDevice(
            f"resources.device is {device!r} but this server has no {device.upper()} device and "
            "no other worker; use 'auto' (CUDA when present, else CPU) or 'cpu'"
        )


def submit_job(
    session: Session,
    settings: Settings,
    enqueuer: Enqueuer,
    spec: JobBase,
    principal: Principal,
    priority: Priority = "normal",
    tags: Sequence[str] = (),
) -> Job:
    """Validate, store as `queued`, commit, and only then wake a worker (best effort)."""
    principal.require("submit")
    require_offered_device(enqueuer, spec)
    placement = placement_for(spec, principal, priority)
    spec = validate_submission(session, spec, settings, principal.team_filter)
    job = repository.create_job(
        session,
        spec.method,
        spec.model_dump(mode="json"),
        spec.label,
        placement,
        tags_with_label(tags, spec.label),
    )
    session.commit()
    wake_workers(enqueuer, job)
    return job


def wake_workers(enqueuer: Enqueuer, job: Job) -> None:
    """Tell a worker about a stored job. The job is already safe in the database: with the
    broker down it stays queued, and the workers' periodic wake-up for waiting jobs reaches
    it once the broker is back, so an outage only delays it and is no failure of the job."""
    try:
        enqueuer.enqueue(job.id, job.device)
    except Exception as exc:  # whatever the broker client raises; the job waits for a scan
        log.warning("job %s stored as queued; its wake-up was not sent (%s)", job.id, exc)


def tags_with_label(tags: Sequence[str], label: str | None) -> list[str]:
    """A label that reads as a tag is the first tag: clients that only know `label` (it
    predates tags) still find their jobs with the tag filter."""
    if label is not None and re.match(TAG_PATTERN, label) and label not in tags:
        return [label, *tags]
    return list(tags)


def set_tags(session: Session, job_id: uuid.UUID, tags: Sequence[str], principal: Principal) -> Job:
    principal.require("submit")
    job = repository.get_job(session, job_id, for_update=True, team_id=principal.team_filter)
    repository.set_tags(session, job, tags)
    session.commit()
    return job


def cancel_job(session: Session, job_id: uuid.UUID, principal: Principal) -> Job:
    principal.require("submit")
    job = repository.request_cancel(session, job_id, principal.name, principal.team_filter)
    session.commit()
    return job


def set_priority(
    session: Session, job_id: uuid.UUID, priority: Priority, principal: Principal
) -> Job:
    """Admins may reorder any job that has not finished (409 once it has: the priority of
    a finished job orders nothing, and its record stays as it ran)."""
    principal.require("admin")
    job = repository.get_job(session, job_id, for_update=True)
    if JobStatus(job.status).terminal:
        raise InvalidTransition(
            f"job {job.id} is {JobStatus(job.status).value}; only a queued or running job "
            "can change its priority"
        )
    before = job.priority
    job.priority = PRIORITY_LEVELS[priority]
    if job.priority != before:  # who reordered the queue, and when: an event of the job
        status = JobStatus(job.status).value
        reason = f"priority {priority_name(before)} -> {priority}"
        job.events.append(
            JobEvent(from_status=status, to_status=status, reason=reason, actor=principal.name)
        )
    session.commit()
    return job


def priority_name(level: int) -> str:
    names = [name for name, value in PRIORITY_LEVELS.items() if value == level]
    return names[0] if names else str(level)
