"""The worker registry's SQL: each worker process records the device it offers and when it
was last seen (its presence, renewed every few seconds while it lives).

A worker that crashed never unregisters; its row is kept `DEAD_WORKER_RETENTION` (admins
may list recently dead workers while looking into a crash) and then pruned by the presence
update of any live worker. Jobs keep their own history: each event names its worker.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.tables import Job, WorkerRecord

DEAD_WORKER_RETENTION = timedelta(hours=1)


def record_presence(
    session: Session,
    name: str,
    host: str,
    offer: Offer,
    device_index: int | None,
    device_name: str | None,
) -> None:
    """Register the worker on first sight; afterwards only move its `heartbeat_at`."""
    record = session.get(WorkerRecord, name)
    if record is None:
        record = WorkerRecord(
            name=name,
            host=host,
            device=offer.device,
            device_index=device_index,
            device_name=device_name,
            gpu_memory_gb=offer.gpu_memory_gb,
            started_at=utcnow(),
        )
        session.add(record)
    record.heartbeat_at = utcnow()
    prune_dead(session, utcnow() - DEAD_WORKER_RETENTION)


def prune_dead(session: Session, silent_since: datetime) -> None:
    """Remove the rows of workers not seen since `silent_since` (crashed, never back)."""
    session.execute(delete(WorkerRecord).where(WorkerRecord.heartbeat_at < silent_since))


def set_current_job(session: Session, name: str, job_id: uuid.UUID | None) -> None:
    record = session.get(WorkerRecord, name)
    if record is not None:
        record.current_job_id = job_id


def unregister(session: Session, name: str) -> None:
    session.execute(delete(WorkerRecord).where(WorkerRecord.name == name))


def list_workers(session: Session, seen_since: datetime | None = None) -> list[WorkerRecord]:
    """Workers by name; with `seen_since`, only those that heartbeat since then."""
    query = select(WorkerRecord).order_by(WorkerRecord.name)
    if seen_since is not None:
        query = query.where(WorkerRecord.heartbeat_at >= seen_since)
    return list(session.scalars(query))


def teams_of_jobs(session: Session, job_ids: set[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID | None]:
    """The team of each job (the jobs workers are running), to scope what a caller sees."""
    if not job_ids:
        return {}
    rows = session.execute(select(Job.id, Job.team_id).where(Job.id.in_(job_ids)))
    return {row.id: row.team_id for row in rows}


def workers_seen_since(session: Session, since: datetime) -> list[WorkerRecord]:
    query = select(WorkerRecord).where(WorkerRecord.heartbeat_at >= since)
    return list(session.scalars(query))
