"""A job's log lines: what its method logged and warned, the worker's messages about it,
and a crash's traceback. Team-scoped like the job; read on with `after=<next_after>`, or
`follow=true` for a stream of lines (NDJSON) that ends when the job has finished and every
line was sent."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, ServicesDep
from archsearch.api.params import JobId
from archsearch.jobs.domain.joblogs import repository
from archsearch.jobs.domain.joblogs.tables import JobLogLine
from archsearch.jobs.platform.services import Services
from archsearch.schemas.logs import JobLogLinePublic, JobLogsPublic

router = APIRouter(prefix="/v1/jobs/{job_id}/logs", tags=["logs"])

MAX_LINE_ID = 2**63 - 1  # a bigint column: a larger `after` is a 422, not a database error


FOLLOW_POLL_SECONDS = 0.5
# A followed stream ends after this long even if the job runs on: no request is unbounded
# in time. The client reconnects with `after=` the last line it got and reads on.
FOLLOW_MAX_SECONDS = 3600.0
NDJSON = "application/x-ndjson"


@router.get(
    "",
    response_model=JobLogsPublic,
    responses={200: {"content": {NDJSON: {"schema": JobLogLinePublic.model_json_schema()}}}},
)
async def read_job_logs(
    job_id: JobId,
    session: ReadSessionDep,
    services: ServicesDep,
    principal: CurrentUser,
    after: Annotated[
        int, Query(ge=0, le=MAX_LINE_ID, description="id of the last line already read")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=5000, description="lines per page")] = 1000,
    follow: Annotated[
        bool, Query(description="stream lines (NDJSON) as they are written, until the job ends")
    ] = False,
) -> Response | JobLogsPublic:
    lines, truncated = await session.run_sync(
        repository.read_page, job_id, principal.team_filter, after, limit
    )
    if follow:  # the read above checked the caller may see the job: 404 before streaming
        stream = _follow(services, job_id, principal.team_filter, lines, after, limit)
        return StreamingResponse(stream, media_type=NDJSON)
    return JobLogsPublic(
        job_id=job_id,
        data=[JobLogLinePublic.model_validate(line) for line in lines],
        next_after=lines[-1].id if lines else after,
        truncated=truncated,
    )


async def _follow(
    services: Services,
    job_id: uuid.UUID,
    team: uuid.UUID | None,
    first: Sequence[JobLogLine],
    after: int,
    limit: int,
) -> AsyncIterator[bytes]:
    """The page already read (for the team check) first, then the lines that follow it."""
    for line in first:
        yield JobLogLinePublic.model_validate(line).model_dump_json().encode() + b"\n"
    after = first[-1].id if first else after
    deadline = time.monotonic() + FOLLOW_MAX_SECONDS
    while time.monotonic() < deadline:
        async with AsyncSession(services.async_reader, expire_on_commit=False) as session:
            lines, finished = await session.run_sync(
                repository.read_page_while_running, job_id, team, after, limit
            )
        for line in lines:
            yield JobLogLinePublic.model_validate(line).model_dump_json().encode() + b"\n"
        if lines:
            after = lines[-1].id
            continue
        if finished:
            return
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
