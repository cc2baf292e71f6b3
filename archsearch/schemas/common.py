"""What every resource's schemas share: reading from attributes, and UTC timestamps."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict

# Every timestamp on the wire carries its time zone (UTC), so a client can print it as
# the user's local time; a naive datetime fails validation instead of going out ambiguous.
UtcDatetime = AwareDatetime


class Public(BaseModel):
    """A response model the API builds from a database row's attributes."""

    model_config = ConfigDict(from_attributes=True)
