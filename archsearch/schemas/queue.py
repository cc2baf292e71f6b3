"""The queue as the scheduler sees it, and the workers that serve it."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, Field

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


class TeamQuotaPublic(BaseModel):
    """A team's limits as the scheduler applies them now."""

    team: str
    running: int
    max_running: int | None = Field(description="null: no limit")
    device_hours_used: float = Field(description="device-hours in the last `window_days` days")
    weekly_device_hours: float | None = Field(description="the quota; null: none")
    window_days: int = Field(description="the quota's window: this many days up to now, rolling")
    held: bool = Field(description="queued jobs wait until device time leaves the window")
    held_reason: str | None


class QueuePublic(BaseModel):
    running: list[JobPublic]
    waiting: list[JobPublic]
    workers: list[WorkerPublic]
    teams: list[TeamQuotaPublic] = Field(
        default=[], description="the caller's team (admins: every team), its limits and hold"
    )
