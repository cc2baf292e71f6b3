"""Path and query parameters shared by several routers: resource ids, a model version's
reference, and the filters of a jobs listing.

Every resource id in a path (of a route or a dashboard page) is parsed here, once: a
malformed id names no such resource, so it answers 404 with the body an unknown id gets
(`no webhook <text>`). A version reference that is not a number where the path says one
goes is the caller's mistake instead: 422 naming `path.ref`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import Depends, Path, Query, Request
from sqlalchemy.orm import Session

from archsearch.api.deps import app_state, read_session
from archsearch.api.v1_checks import checked_caller
from archsearch.core.errors import UserError
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.ids import whole_id
from archsearch.jobs.domain.jobs import listing
from archsearch.jobs.domain.jobs.listing import JobFilters
from archsearch.jobs.domain.studies import repository as studies_repository
from archsearch.schemas.jobs import JobStatus

Resolver = Callable[[Session, str, uuid.UUID | None], uuid.UUID]


def id_of(text: str, noun: str) -> uuid.UUID:
    """The id `text` names, or NotFound("no <noun> <text>") when it is not an id."""
    try:
        return uuid.UUID(text)
    except ValueError:
        raise NotFound(f"no {noun} {text}") from None


async def resolved_id(request: Request, text: str, resolve: Resolver) -> uuid.UUID:
    """A whole id as it is (no database), or the one id of the caller's team that starts so."""
    whole = whole_id(text)
    if whole is not None:
        return whole
    team_filter = checked_caller(request).team_filter
    async with read_session(app_state(request).services) as session:
        return await session.run_sync(resolve, text, team_filter)


# FastAPI matches a dependency's argument to the path parameter by name: one per resource.
async def parse_job_id(job_id: str, request: Request) -> uuid.UUID:
    return await resolved_id(request, job_id, listing.resolve_job_id)


async def parse_study_id(study_id: str, request: Request) -> uuid.UUID:
    return await resolved_id(request, study_id, studies_repository.resolve_study_id)


async def parse_webhook_id(webhook_id: str) -> uuid.UUID:
    return id_of(webhook_id, "webhook")


JobId = Annotated[uuid.UUID, Depends(parse_job_id)]
StudyId = Annotated[uuid.UUID, Depends(parse_study_id)]
WebhookId = Annotated[uuid.UUID, Depends(parse_webhook_id)]

VersionNumber = Annotated[int, Path(ge=1)]


class InvalidVersionRef(UserError):
    field = "path.ref"


async def parse_version_ref(
    by: Annotated[Literal["versions", "aliases"], Path(description="how `ref` names the version")],
    ref: Annotated[str, Path(description="a version number (versions/2) or an alias")],
) -> str:
    """The version a path names, as the registry resolves it: a number or an alias."""
    if by == "versions" and not (ref.isdigit() and int(ref) >= 1):
        raise InvalidVersionRef(f"a version number is 1 or more, not {ref!r}; or use aliases/{ref}")
    return ref


VersionRef = Annotated[str, Depends(parse_version_ref)]


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
