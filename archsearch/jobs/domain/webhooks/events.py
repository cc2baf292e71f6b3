"""The events a webhook may ask for, and the one function that puts an event in the outbox.

`record` runs inside the transaction of the change it reports; with no webhook of the team
asking for the event it writes nothing, so a team without webhooks pays one small read.
"""

from __future__ import annotations

import uuid
from typing import Any, get_args

from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.domain.webhooks import repository
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.webhooks import WebhookEventName

JOB_OUTCOMES = {
    JobStatus.succeeded: "job.succeeded",
    JobStatus.failed: "job.failed",
    JobStatus.cancelled: "job.cancelled",
    JobStatus.pruned: "job.pruned",
}
JOB_WARNING = "job.warning"
# A running job handed back to the queue on a graceful worker stop (`jobs/handback.py`).
JOB_PREEMPTED = "job.preempted"
STUDY_FINISHED = "study.finished"
MODEL_VERSION_CREATED = "model.version_created"
MODEL_ALIAS_CHANGED = "model.alias_changed"
EVENTS: tuple[str, ...] = get_args(WebhookEventName)
PING = "ping"  # what POST /v1/webhooks/{id}/test sends; not one to subscribe to


def record(
    session: Session, team_id: uuid.UUID | None, name: str, subject: str, data: dict[str, Any]
) -> None:
    hooks = repository.subscribers(session, team_id, name)
    if hooks:
        payload = {"event": name, "occurred_at": utcnow().isoformat(), **data}
        repository.add_event(session, name, subject, payload, hooks)


def job_data(job: Job, from_status: str | None, reason: str) -> dict[str, Any]:
    return {
        "job": {
            "id": str(job.id),
            "method": job.method,
            "label": job.label,
            "status": JobStatus(job.status).value,
            "from_status": from_status,
            "reason": reason,
            "error": job.error,
            "attempts": job.attempts,
            "metrics": job.latest_metrics or {},
            "warnings": job.warnings or [],
            "study_id": None if job.study_id is None else str(job.study_id),
        }
    }


def job_outcome(session: Session, job: Job, from_status: str, reason: str) -> None:
    """A job reached a terminal status (called by the state machine, in its transaction)."""
    name = JOB_OUTCOMES[JobStatus(job.status)]
    record(session, job.team_id, name, f"job:{job.id}", job_data(job, from_status, reason))


def job_warning(session: Session, job: Job) -> None:
    data = job_data(job, JobStatus(job.status).value, "warnings")
    record(session, job.team_id, JOB_WARNING, f"job:{job.id}", data)


def job_preempted(session: Session, job: Job, reason: str) -> None:
    data = job_data(job, JobStatus.running.value, reason)
    record(session, job.team_id, JOB_PREEMPTED, f"job:{job.id}", data)
