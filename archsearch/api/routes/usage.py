"""Device usage: `GET /v1/usage?from=&to=&group_by=user|team|method&format=json|csv`.

Device-seconds charged for every run of a job (claim to end; a run whose worker was killed,
to its last lease renewal), each run's time times the share of the device it held (1/K on a
worker with K slots), by device kind; `attempts` counts the runs that counted against
`max_attempts`, `runs` every run. A user sees their team's, an admin every team's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep
from archsearch.api.params import JobId
from archsearch.api.presenters import usage_answer
from archsearch.jobs.domain.jobs import run_usage
from archsearch.jobs.domain.usage import service
from archsearch.schemas.usage import (
    JobUsagePublic,
    UsageFormat,
    UsageGroup,
    UsagePeriod,
    UsagePublic,
)

router = APIRouter(prefix="/v1/usage", tags=["usage"])
CSV_RESPONSE = {200: {"content": {"text/csv": {}}, "description": "the report, as CSV"}}


@router.get("", response_model=UsagePublic, responses=CSV_RESPONSE)  # type: ignore[arg-type]
async def read_usage(
    session: ReadSessionDep,
    principal: CurrentUser,
    period: Annotated[UsagePeriod, Query()],
    group_by: UsageGroup = "team",
    format: UsageFormat = "json",
) -> UsagePublic | Response:
    """Default window: the last seven days up to now."""
    usage = await session.run_sync(service.report, principal, period.from_, period.to, group_by)
    return usage_answer(usage, format)


@router.get("/jobs/{job_id}", response_model=JobUsagePublic)
async def read_job_usage(
    job_id: JobId, session: ReadSessionDep, principal: CurrentUser
) -> JobUsagePublic:
    """A job's runs: each one's device time and share, and what each used of its device
    (device name, peak memory, utilisation; null for a run killed with its process)."""
    return await session.run_sync(run_usage.job_usage, principal, job_id)
