"""Jobs: a job, a page of jobs, its events and metrics, and a priority change."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from archsearch.schemas.common import Public, UtcDatetime
from archsearch.specs import JobBase, parse_job_spec


class JobStatus(enum.StrEnum):
    """A job's life: queued -> running -> succeeded | failed | cancelled | pruned (running
    may go back to queued when its worker is lost or hands it back). `pruned`: a study's
    trial its pruner stopped early at an epoch boundary; its metrics so far are kept."""

    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    pruned = "pruned"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled, JobStatus.pruned}
)

Priority = Literal["low", "normal", "high", "urgent"]
# Stored as numbers so the queue orders by them; the names are what users write.
PRIORITY_LEVELS: Mapping[Priority, int] = {"low": -10, "normal": 0, "high": 10, "urgent": 20}
ADMIN_ONLY_PRIORITY_LEVEL = PRIORITY_LEVELS["urgent"]


def priority_name(level: int) -> str:
    """The name of a stored priority level (the number itself for a level no name has)."""
    names = {value: name for name, value in PRIORITY_LEVELS.items()}
    return names.get(level, str(level))


# A tag: a letter or digit, then up to 63 of letters, digits and `_ . : / + -` (no spaces or
# commas, so a tag list reads back unambiguously in a URL or a CSV cell).
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/+-]{0,63}$"
Tag = Annotated[str, StringConstraints(pattern=TAG_PATTERN, max_length=64)]
MAX_TAGS = 20

# How `GET /v1/jobs` may order its page: a column of the runs table, `-` for descending.
JobSort = Literal[
    "created_at",
    "-created_at",
    "test_accuracy",
    "-test_accuracy",
    "parameters",
    "-parameters",
    "duration",
    "-duration",
    "status",
    "-status",
    "method",
    "-method",
]


class WarningPublic(BaseModel):
    """Something a finished run wants the user to know, e.g. `collapsed_predictions`."""

    code: str
    message: str


class JobPublic(Public):
    id: uuid.UUID
    method: str
    status: JobStatus
    label: str | None
    tags: list[str] = []
    spec: dict[str, Any]
    progress: float
    step: int
    total_steps: int
    latest_metrics: dict[str, float]
    error: str | None
    # A `succeeded` job with warnings finished, but its result deserves a look.
    warnings: list[WarningPublic] = []
    # Runs that counted against `max_attempts`: a run handed back (a graceful stop, a
    # preemption, a storage outage) gave its attempt back (usage reports count `runs`).
    attempts: int
    cancel_requested: bool
    worker: str | None
    created_at: UtcDatetime
    started_at: UtcDatetime | None
    finished_at: UtcDatetime | None
    updated_at: UtcDatetime
    owner_id: uuid.UUID | None
    owner_name: str | None = None  # the submitting user's name (team mode)
    team_id: uuid.UUID | None
    priority: int
    device: str
    queue_position: int | None = None
    pending_reason: str | None = None
    study_id: uuid.UUID | None = None  # a study's job: which study, which arm
    study_arm: str | None = None

    def parsed_spec(self) -> JobBase:
        """The spec as its typed model (`TrainJob`, `PruneJob`, ...), with every default.

        `spec` itself stays the stored JSON on the wire, so a job stored by an older
        version still reads even where today's models would word it differently."""
        return parse_job_spec(self.spec)


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


class TagsUpdate(BaseModel):
    """A job's tags, replaced as a whole (an empty list removes them all)."""

    tags: list[Tag] = Field(max_length=MAX_TAGS)
