"""Jobs: a job, a page of jobs, its events and metrics, and a priority change."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel

from archsearch.schemas.common import Public, UtcDatetime

Priority = Literal["low", "normal", "high", "urgent"]


class WarningPublic(BaseModel):
    """Something a finished run wants the user to know, e.g. `collapsed_predictions`."""

    code: str
    message: str


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
    # A `succeeded` job with warnings finished, but its result deserves a look.
    warnings: list[WarningPublic] = []
    attempts: int
    cancel_requested: bool
    worker: str | None
    created_at: UtcDatetime
    started_at: UtcDatetime | None
    finished_at: UtcDatetime | None
    updated_at: UtcDatetime
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
    at: UtcDatetime


class EventsPublic(BaseModel):
    job_id: uuid.UUID
    data: list[EventPublic]


class MetricPoint(BaseModel):
    step: int
    value: float


class MetricsPublic(BaseModel):
    job_id: uuid.UUID
    series: dict[str, list[MetricPoint]]


class PriorityUpdate(BaseModel):
    priority: Priority
