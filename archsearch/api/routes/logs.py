"""A job's log lines: what its method logged and warned, the worker's messages about it,
and a crash's traceback. Team-scoped like the job; read on with `after=<next_after>` to
follow a running job."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep
from archsearch.api.params import JobId
from archsearch.jobs.domain.joblogs import repository
from archsearch.schemas.logs import JobLogLinePublic, JobLogsPublic

router = APIRouter(prefix="/v1/jobs/{job_id}/logs", tags=["logs"])

MAX_LINE_ID = 2**63 - 1  # a bigint column: a larger `after` is a 422, not a database error


@router.get("", response_model=JobLogsPublic)
async def read_job_logs(
    job_id: JobId,
    session: ReadSessionDep,
    principal: CurrentUser,
    after: Annotated[
        int, Query(ge=0, le=MAX_LINE_ID, description="id of the last line already read")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=5000, description="lines per page")] = 1000,
) -> JobLogsPublic:
    lines, truncated = await session.run_sync(
        repository.read_page, job_id, principal.team_filter, after, limit
    )
    return JobLogsPublic(
        job_id=job_id,
        data=[JobLogLinePublic.model_validate(line) for line in lines],
        next_after=lines[-1].id if lines else after,
        truncated=truncated,
    )
