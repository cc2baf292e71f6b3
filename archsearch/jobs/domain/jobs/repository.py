"""All SQL of the job domain. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import User
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.errors import InvalidTransition, NotFound
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.domain.tables import Artifact, Job, JobEvent, JobTag, Metric
from archsearch.jobs.domain.webhooks import events
from archsearch.jobs.platform.store import StoredFile
from archsearch.schemas.jobs import JobStatus


@dataclass(frozen=True)
class Placement:
    """Who submitted a job and what it needs from a worker."""

    actor: str = "local"
    owner_id: uuid.UUID | None = None
    team_id: uuid.UUID | None = None
    priority: int = 0
    device: str = "auto"
    min_gpu_memory_gb: float | None = None


def create_job(
    session: Session,
    method: str,
    spec: dict[str, Any],
    label: str | None,
    placement: Placement = Placement(),
    tags: Sequence[str] = (),
    flush: bool = True,
) -> Job:
    """A queued job with its event and tags; `flush=False` leaves the writing to a caller
    that creates many (a study: one batch per table, not round trips per job)."""
    unique_tags = list(dict.fromkeys(tags))
    job = Job(
        id=uuid.uuid4(),
        method=method,
        spec=spec,
        label=label,
        tags=unique_tags,
        status=JobStatus.queued,
        owner_id=placement.owner_id,
        team_id=placement.team_id,
        priority=placement.priority,
        device=placement.device,
        min_gpu_memory_gb=placement.min_gpu_memory_gb,
    )
    job.events.append(
        JobEvent(
            from_status=None,
            to_status=JobStatus.queued.value,
            reason="submitted",
            actor=placement.actor,
        )
    )
    session.add(job)
    # A new job has no tag rows to replace: they go in with it, in one flush (the submit
    # path's round trips count in submit -> running).
    session.add_all(JobTag(tag=tag, job_id=job.id) for tag in unique_tags)
    if flush:
        session.flush()
    return job


def set_tags(session: Session, job: Job, tags: Sequence[str]) -> None:
    """Replace the job's tags: the list read with the job, and the rows the filter walks."""
    unique = list(dict.fromkeys(tags))
    session.execute(delete(JobTag).where(JobTag.job_id == job.id))
    session.add_all(JobTag(tag=tag, job_id=job.id) for tag in unique)
    job.tags = unique
    session.flush()


def get_job(
    session: Session,
    job_id: uuid.UUID,
    *,
    for_update: bool = False,
    team_id: uuid.UUID | None = None,
) -> Job:
    """The job; with `team_id`, a job of another team is reported missing, as if absent."""
    # session.get: the primary-key fast path (no statement to build), then the team check.
    job = session.get(Job, job_id, with_for_update=for_update or None)
    if job is None or (team_id is not None and job.team_id != team_id):
        raise NotFound(f"no job {job_id}")
    return job


def read_job_row(session: Session, job_id: uuid.UUID, team_id: uuid.UUID | None = None) -> Any:
    """The job as a plain row (attribute access, no ORM object), with its owner's name
    (`owner_name`) in the same query: the polling path's read."""
    table = Job.__table__
    owner = User.__table__
    query = (
        select(table, owner.c.name.label("owner_name"))
        .outerjoin(owner, owner.c.id == table.c.owner_id)
        .where(table.c.id == job_id)
    )
    if team_id is not None:
        query = query.where(table.c.team_id == team_id)
    row = session.execute(query).first()
    if row is None:
        raise NotFound(f"no job {job_id}")
    return row


def request_cancel(
    session: Session, job_id: uuid.UUID, actor: str = "local", team_id: uuid.UUID | None = None
) -> Job:
    """A queued job is cancelled at once; a running one is flagged and stops at its next step."""
    job = get_job(session, job_id, for_update=True, team_id=team_id)
    if job.status is JobStatus.queued:
        transition(job, JobStatus.cancelled, "cancelled before it started", actor)
    elif job.status is JobStatus.running:
        job.cancel_requested = True
        job.cancel_requested_by = actor
    else:
        raise InvalidTransition(f"job {job_id} already {job.status.value}; nothing to cancel")
    return job


def record_progress(
    session: Session,
    job_id: uuid.UUID,
    step: int,
    total: int,
    latest: dict[str, float],
    rows: Iterable[tuple[int, str, float]] = (),
) -> bool:
    """Store progress, and the metric `rows` reported since the last write; returns whether
    a cancel was requested. On PostgreSQL one statement (the rows' upsert a data-modifying
    CTE of the progress update), so `single_statement` may run it on its own."""
    values: dict[str, Any] = {
        "step": step,
        "total_steps": total,
        "progress": step / total if total else 0.0,
        "updated_at": utcnow(),
    }
    if latest:
        values["latest_metrics"] = finite_only(latest)
    # The fleet's most frequent write: every running job, every flush interval.
    statement = update(Job).where(Job.id == job_id).values(**values)
    upsert = _metrics_upsert(session, job_id, rows)
    if upsert is not None and session.get_bind().dialect.name == "postgresql":
        statement = statement.add_cte(upsert.cte("reported_metrics"))
    elif upsert is not None:
        session.execute(upsert)
    return bool(session.scalar(statement.returning(Job.cancel_requested)))


def finite_only(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics a JSON column can hold: JSON has no NaN or infinity (PostgreSQL refuses
    them), and an undefined value says nothing a reader needs. The metric rows keep them."""
    return {name: value for name, value in metrics.items() if math.isfinite(value)}


def _insert_for(session: Session) -> Any:
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


def record_metrics(
    session: Session, job_id: uuid.UUID, rows: Iterable[tuple[int, str, float]]
) -> None:
    """Upsert metric values: a resumed job rewrites the steps it repeats instead of doubling
    them."""
    upsert = _metrics_upsert(session, job_id, rows)
    if upsert is not None:
        session.execute(upsert)


def _metrics_upsert(
    session: Session, job_id: uuid.UUID, rows: Iterable[tuple[int, str, float]]
) -> Any:
    # One flush may carry the same (step, name) twice; one INSERT ... ON CONFLICT cannot
    # touch a row twice on PostgreSQL, so the last value of each pair is sent.
    latest = {(s, n): v for s, n, v in rows}
    values = [{"job_id": job_id, "step": s, "name": n, "value": v} for (s, n), v in latest.items()]
    if not values:
        return None
    statement = _insert_for(session)(Metric).values(values)
    return statement.on_conflict_do_update(
        index_elements=["job_id", "name", "step"], set_={"value": statement.excluded.value}
    )


def upsert_artifact(
    session: Session, job_id: uuid.UUID, name: str, media_type: str, stored: StoredFile
) -> None:
    """The row of a file now in the store (a chart's too, once drawn: its data is dropped)."""
    _upsert_artifact_row(
        session, job_id, name, media_type, size=stored.size, sha256=stored.sha256, chart=None
    )


def add_chart(session: Session, job_id: uuid.UUID, name: str, chart: dict[str, Any]) -> None:
    """The row of a PNG chart not drawn yet: its data, no file (drawn on first download)."""
    _upsert_artifact_row(session, job_id, name, "image/png", size=None, sha256=None, chart=chart)


def _upsert_artifact_row(
    session: Session, job_id: uuid.UUID, name: str, media_type: str, **file: Any
) -> None:
    values = {"job_id": job_id, "name": name, "media_type": media_type, **file}
    statement = _insert_for(session)(Artifact).values({**values, "created_at": utcnow()})
    statement = statement.on_conflict_do_update(
        index_elements=["job_id", "name"],
        set_={k: statement.excluded[k] for k in ("media_type", *file, "created_at")},
    )
    session.execute(statement)


def finish_job(
    session: Session,
    job_id: uuid.UUID,
    status: JobStatus,
    reason: str,
    *,
    error: str | None = None,
    metrics: dict[str, float] | None = None,
    warnings: Sequence[tuple[str, str]] = (),
    actor: str | None = None,
) -> Job:
    """The one place a run's outcome is recorded. Each warning, a `(code, message)` pair,
    is kept on the job and recorded as an event whose reason is its message."""
    job = get_job(session, job_id, for_update=True)
    if status is JobStatus.cancelled and job.cancel_requested_by:
        reason, actor = (
            f"cancelled by {job.cancel_requested_by} while running",
            job.cancel_requested_by,
        )
    # Set before the transition, which reports them to the webhook outbox.
    job.error = error
    if metrics:
        job.latest_metrics = finite_only(metrics)
    job.warnings = [{"code": code, "message": message} for code, message in warnings]
    transition(job, status, reason, actor)
    for _, message in warnings:
        job.events.append(
            JobEvent(from_status=status.value, to_status=status.value, reason=message, actor=actor)
        )
    if warnings:
        events.job_warning(session, job)
    return job


def list_artifacts(
    session: Session, job_id: uuid.UUID, team_id: uuid.UUID | None = None
) -> list[Artifact]:
    get_job(session, job_id, team_id=team_id)
    return list(
        session.scalars(select(Artifact).where(Artifact.job_id == job_id).order_by(Artifact.name))
    )


def get_artifact(
    session: Session, job_id: uuid.UUID, name: str, team_id: uuid.UUID | None = None
) -> Artifact:
    get_job(session, job_id, team_id=team_id)  # a missing (or foreign) job is reported as such
    artifact = session.get(Artifact, (job_id, name))
    if artifact is None:
        raise NotFound(f"job {job_id} has no artifact {name!r}")
    return artifact


def list_events(
    session: Session, job_id: uuid.UUID, team_id: uuid.UUID | None = None
) -> list[JobEvent]:
    get_job(session, job_id, team_id=team_id)
    return list(
        session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id))
    )


def metric_series(
    session: Session, job_id: uuid.UUID, names: Sequence[str] = (), team_id: uuid.UUID | None = None
) -> dict[str, list[tuple[int, float]]]:
    get_job(session, job_id, team_id=team_id)
    query = select(Metric.name, Metric.step, Metric.value).where(Metric.job_id == job_id)
    if names:
        query = query.where(Metric.name.in_(names))
    series: dict[str, list[tuple[int, float]]] = {}
    for name, step, value in session.execute(query.order_by(Metric.name, Metric.step)):
        series.setdefault(name, []).append((step, value))
    return series


def job_ids_with_status(session: Session, status: JobStatus) -> list[uuid.UUID]:
    """Ids in submission order (oldest first)."""
    query = select(Job.id).where(Job.status == status).order_by(Job.created_at, Job.id)
    return list(session.scalars(query))


def files_of_jobs(
    session: Session, job_ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, tuple[JobStatus, set[str]]]:
    """Each existing job's status and the artifact names it records (absent: no such job)."""
    ids = list(set(job_ids))
    found: dict[uuid.UUID, tuple[JobStatus, set[str]]] = {
        job_id: (status, set())
        for job_id, status in session.execute(select(Job.id, Job.status).where(Job.id.in_(ids)))
    }
    names = select(Artifact.job_id, Artifact.name).where(Artifact.job_id.in_(ids))
    for job_id, name in session.execute(names):
        found[job_id][1].add(name)
    return found
