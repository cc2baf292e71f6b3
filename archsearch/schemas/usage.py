"""Device usage on the wire: device-seconds per group (user, team or method) and device."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from archsearch.schemas.common import UtcDatetime

UsageGroup = Literal["user", "team", "method"]
UsageFormat = Literal["json", "csv"]


class UsageRow(BaseModel):
    group: str  # the user's, team's or method's name ("none" when a job has no team/owner)
    device: str  # cpu | cuda
    # Charged: each run's time in the window times the share of the device it held (1/K
    # on a worker running K jobs at once); `held_seconds` is the same time unshared.
    device_seconds: float
    device_hours: float
    held_seconds: float
    # Runs: every claim of a job (each charged). Attempts: the runs that counted against
    # `max_attempts`, as a job's `attempts` (a run handed back gave its attempt back).
    attempts: int
    runs: int
    jobs: int


class UsagePublic(BaseModel):
    start: UtcDatetime
    end: UtcDatetime
    group_by: UsageGroup
    data: list[UsageRow]


class UsagePeriod(BaseModel):
    """The `from` and `to` query parameters of a report: both, or neither (the last seven
    days up to now). One alone would leave the other end to a default the caller did not
    choose, so it is refused, 422 naming the missing one. A time without a zone is UTC; that
    `to` comes after `from` is checked with the zones applied (`usage.service.window`)."""

    from_: datetime | None = Field(None, alias="from", description="start, inclusive")
    # validate_default: the check below must also run when `to` is absent (and the field is
    # named as on the wire, since an absent value's error is located by the field's name).
    to: datetime | None = Field(None, description="end, exclusive", validate_default=True)

    @field_validator("to")
    @classmethod
    def _both_or_neither(cls, to: datetime | None, info: ValidationInfo) -> datetime | None:
        if "from_" not in info.data:
            return to  # `from` itself was invalid, and is reported on its own
        if (info.data["from_"] is None) != (to is None):
            missing = "to" if to is None else "from"
            raise ValueError(
                f"'{missing}' is missing: give both 'from' and 'to', or neither for the last 7 days"
            )
        return to


class JobRunUsage(BaseModel):
    """One run (claim) of a job: its device time and what it used of its device (null for a
    run killed with its process, which could not report)."""

    attempt: int
    device: str  # cpu | cuda
    worker: str
    started_at: UtcDatetime
    ended_at: UtcDatetime | None
    held_seconds: float
    device_share: float
    device_seconds: float  # held_seconds times device_share: what the run is charged
    given_back: bool
    device_name: str | None = None
    peak_memory_mb: float | None = None
    utilization: float | None = None  # GPU: mean busy fraction; CPU: cores busy on average


class JobUsagePublic(BaseModel):
    job_id: str
    runs: list[JobRunUsage]
    device_seconds: float
