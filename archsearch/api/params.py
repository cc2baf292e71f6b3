"""Path and query parameters shared by several routers."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, Query

from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.jobs.listing import JobFilters
from archsearch.jobs.domain.tables import JobStatus


def job_id_of(text: str) -> uuid.UUID:
    # A malformed id names no job: 404, like any other unknown id.
    try:
        return uuid.UUID(text)
    except ValueError:
        raise NotFound(f"no job {text}") from None


async def parse_job_id(job_id: str) -> uuid.UUID:
    return job_id_of(job_id)


JobId = Annotated[uuid.UUID, Depends(parse_job_id)]


async def job_filters(
    status_: Annotated[list[JobStatus], Query(alias="status")] = [],  # noqa: B006
    method: Annotated[list[str], Query()] = [],  # noqa: B006
    id_prefix: Annotated[
        str | None,
        Query(
            pattern="^[0-9a-fA-F]{1,32}$",
            description="1 to 32 hex digits: only jobs whose id (without dashes) starts so",
        ),
    ] = None,
    tag: Annotated[list[str], Query(description="jobs carrying every one of these tags")] = [],  # noqa: B006
    owner: Annotated[uuid.UUID | None, Query(description="id of the submitting user")] = None,
    dataset: Annotated[
        str | None, Query(max_length=200, description="a built-in dataset name or an upload id")
    ] = None,
    study: Annotated[uuid.UUID | None, Query(description="id of a study: its jobs")] = None,
    study_jobs: Annotated[
        bool, Query(description="false: leave out the jobs that belong to a study")
    ] = True,
) -> JobFilters:
    """The filters of a jobs listing, from its query parameters (the team is the caller's)."""
    return JobFilters(
        statuses=status_,
        methods=method,
        id_prefix=id_prefix,
        tags=tag,
        owner_id=owner,
        dataset=dataset,
        study_id=study,
        include_study_jobs=study_jobs,
    )


JobFiltersQuery = Annotated[JobFilters, Depends(job_filters)]
