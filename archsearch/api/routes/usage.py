"""Device usage: `GET /v1/usage?from=&to=&group_by=user|team|method&format=json|csv`.

Device-seconds of every attempt (claim to end) by device kind; a user sees their team's,
an admin every team's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep
from archsearch.api.presenters import usage_answer
from archsearch.jobs.domain.usage import service
from archsearch.schemas.usage import UsageFormat, UsageGroup, UsagePeriod, UsagePublic

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
