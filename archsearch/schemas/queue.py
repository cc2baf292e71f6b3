"""The queue as the scheduler sees it, and the workers that serve it."""

from __future__ import annotations

import uuid

from pydantic import BaseModel

from archsearch.schemas.common import Public, UtcDatetime
from archsearch.schemas.jobs import JobPublic


class WorkerPublic(Public):
    name: str
    host: str
    device: str
    device_index: int | None
    device_name: str | None
    gpu_memory_gb: float | None
    # Null for an idle worker, and for one running another team's job: `busy` says which.
    current_job_id: uuid.UUID | None
    busy: bool = False
    started_at: UtcDatetime
    heartbeat_at: UtcDatetime
    heartbeat_age_seconds: float = 0.0
    alive: bool = True


class WorkersPublic(BaseModel):
    data: list[WorkerPublic]


class QueuePublic(BaseModel):
    running: list[JobPublic]
    waiting: list[JobPublic]
    workers: list[WorkerPublic]
