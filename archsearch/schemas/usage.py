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
    device_seconds: float
    device_hours: float
    attempts: int
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
