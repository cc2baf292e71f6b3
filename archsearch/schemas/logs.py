"""Log lines of a job, read page by page with an `after` cursor (the last line's id)."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, Field

from archsearch.schemas.common import Public, UtcDatetime


class JobLogLinePublic(Public):
    id: int
    at: UtcDatetime
    level: str
    logger: str
    message: str


class JobLogsPublic(BaseModel):
    job_id: uuid.UUID
    data: list[JobLogLinePublic]
    next_after: int = Field(description="pass as `after` to read the lines that follow")
    truncated: bool = Field(description="the job logged more than the server keeps")
