"""Device usage on the wire: device-seconds per group (user, team or method) and device."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from archsearch.schemas.common import UtcDatetime

UsageGroup = Literal["user", "team", "method"]
UsageFormat = Literal["json", "csv"]


class UsageRow(BaseModel):
    group: str  # the user's, team's or method's name ("none" when a job has no team/owner)
    device: str  # cpu | cuda
    device_seconds: float
    device_hours: float
    attempts: int
    jobs: int


class UsagePublic(BaseModel):
    start: UtcDatetime
    end: UtcDatetime
    group_by: UsageGroup
    data: list[UsageRow]
