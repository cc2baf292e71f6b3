"""The worker registry's SQL: each worker process records the device it offers and when it
was last seen (its presence, renewed every few seconds while it lives)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.offer import Offer
from archsearch.jobs.domain.tables import WorkerRecord


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


def set_current_job(session: Session, name: str, job_id: uuid.UUID | None) -> None:
    record = session.get(WorkerRecord, name)
    if record is not None:
        record.current_job_id = job_id


def unregister(session: Session, name: str) -> None:
    session.execute(delete(WorkerRecord).where(WorkerRecord.name == name))


def list_workers(session: Session) -> list[WorkerRecord]:
    return list(session.scalars(select(WorkerRecord).order_by(WorkerRecord.name)))


def workers_seen_since(session: Session, since: datetime) -> list[WorkerRecord]:
    query = select(WorkerRecord).where(WorkerRecord.heartbeat_at >= since)
    return list(session.scalars(query))
