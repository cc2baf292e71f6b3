"""Path and query parameters shared by several routers."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends

from archsearch.jobs.domain.errors import NotFound


async def parse_job_id(job_id: str) -> uuid.UUID:
    # A malformed id names no job: 404, like any other unknown id.
    try:
        return uuid.UUID(job_id)
    except ValueError:
        raise NotFound(f"no job {job_id}") from None


JobId = Annotated[uuid.UUID, Depends(parse_job_id)]
