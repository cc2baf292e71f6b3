"""The worker registry: each worker process records the device it offers and heartbeats."""

from __future__ import annotations

import uuid

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.scheduler import Offer
from archsearch.jobs.domain.tables import WorkerRecord, utcnow


def heartbeat(
    session: Session,
    name: str,
    host: str,
    offer: Offer,
    device_index: int | None,
    device_name: str | None,
) -> None:
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
