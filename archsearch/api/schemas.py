"""Public shapes of the REST API (`JobPublic`, `JobsPublic`, ...)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Public(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class JobPublic(Public):
    id: uuid.UUID
    method: str
    status: str
    label: str | None
    spec: dict[str, Any]
    progress: float
    step: int
    total_steps: int
    latest_metrics: dict[str, float]
    error: str | None
    attempts: int
    cancel_requested: bool
    worker: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    owner_id: uuid.UUID | None
    team_id: uuid.UUID | None
    priority: int
    device: str
    queue_position: int | None = None
    pending_reason: str | None = None


class JobsPublic(BaseModel):
    data: list[JobPublic]
    next_cursor: str | None


class EventPublic(Public):
    from_status: str | None
    to_status: str
    reason: str
    actor: str | None
    at: datetime


class EventsPublic(BaseModel):
    job_id: uuid.UUID
    data: list[EventPublic]


class MetricPoint(BaseModel):
    step: int
    value: float


class MetricsPublic(BaseModel):
    job_id: uuid.UUID
    series: dict[str, list[MetricPoint]]


class ArtifactPublic(Public):
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: datetime


class ArtifactsPublic(BaseModel):
    job_id: uuid.UUID
    data: list[ArtifactPublic]


class DatasetPublic(BaseModel):
    """A dataset jobs can train on: built in (`{"name": ...}`) or uploaded (`{"id": ...}`)."""

    source: str = "builtin"  # builtin | upload
    id: str | None = None  # uploads only: what a job's `dataset.id` names
    name: str
    description: str
    input_shape: list[int]
    num_classes: int
    train_size: int
    test_size: int


class DatasetsPublic(BaseModel):
    data: list[DatasetPublic]


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    error: str
    detail: str | list[FieldError]


class PriorityUpdate(BaseModel):
    priority: Literal["low", "normal", "high", "urgent"]


class WorkerPublic(Public):
    name: str
    host: str
    device: str
    device_index: int | None
    device_name: str | None
    gpu_memory_gb: float | None
    current_job_id: uuid.UUID | None
    started_at: datetime
    heartbeat_at: datetime
    heartbeat_age_seconds: float = 0.0
    alive: bool = True


class WorkersPublic(BaseModel):
    data: list[WorkerPublic]


class QueuePublic(BaseModel):
    running: list[JobPublic]
    waiting: list[JobPublic]
    workers: list[WorkerPublic]
