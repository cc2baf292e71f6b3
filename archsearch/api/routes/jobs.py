"""Jobs: submit, list (as JSON or as the runs table's CSV), read, cancel, reprioritise, and a
job's metrics and events.

Every query is scoped to the caller's team (admins see all); another team's job answers
404, exactly as a job that does not exist. Reads are `async def` on the async read engine
(no thread hop); writes are plain `def`, one transaction each in FastAPI's thread pool.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status
from sqlalchemy.orm import Session

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import (
    EnqueuerDep,
    ReadSessionDep,
    ServicesDep,
    SessionDep,
    SettingsDep,
    app_state,
    read_session,
)
from archsearch.api.errors import BODY_ERROR_RESPONSES
from archsearch.api.live.answers import Answer
from archsearch.api.params import JobFiltersQuery, JobId, parse_job_id
from archsearch.api.presenters import job_with_queue_state, jobs_with_owner_names
from archsearch.api.runs_csv import (
    MAX_ROWS,
    CsvResponse,
    csv_lines,
    fetch_page,
    first_page_size,
)
from archsearch.api.state import AppState
from archsearch.api.v1_checks import checked_caller
from archsearch.jobs.domain.jobs import columns, listing, repository, service
from archsearch.schemas.jobs import (
    EventPublic,
    EventsPublic,
    JobPublic,
    JobsPublic,
    JobStatus,
    MetricPoint,
    MetricsPublic,
    Priority,
    PriorityUpdate,
    Tag,
    TagsUpdate,
)
from archsearch.specs import JobSpec

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

SortQuery = Annotated[
    str,
    Query(
        max_length=200,
        description="order of the page: created_at, test_accuracy, parameters, duration, "
        "status, method, metrics.<name> or spec.<path> (e.g. spec.training.optimizer.lr); "
        "`-` first for descending",
    ),
]
WhereQuery = Annotated[
    list[str],
    Query(
        description="jobs whose metric or spec field compares so, e.g. "
        "metrics.test_accuracy>0.9 or spec.training.optimizer.name=adam (repeat: all of them)",
    ),
]
ColumnsQuery = Annotated[
    list[str],
    Query(description="extra columns of the CSV: metrics.<name> or spec.<path> (repeat)"),
]


def _listing_filters(
    filters: listing.JobFilters, where: list[str], team_filter: uuid.UUID | None
) -> listing.JobFilters:
    return replace(filters, team_id=team_filter, conditions=columns.parse_conditions(where))


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=JobPublic,
    responses=BODY_ERROR_RESPONSES,
)
def create_job(
    spec: Annotated[JobSpec, Body()],
    session: SessionDep,
    settings: SettingsDep,
    enqueuer: EnqueuerDep,
    principal: CurrentUser,
    response: Response,
    priority: Priority = "normal",
    tag: Annotated[list[Tag], Query(description="tags of the job (repeat the parameter)")] = [],  # noqa: B006
) -> JobPublic:
    job = service.submit_job(session, settings, enqueuer, spec, principal, priority, tag)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    # Where it waits and why, as the queue shows it (the answer follows the commit: the
    # position counts the jobs that were queued before it).
    return job_with_queue_state(session, job, settings)


@router.get("", response_model=JobsPublic)
async def list_jobs(
    session: ReadSessionDep,
    principal: CurrentUser,
    filters: JobFiltersQuery,
    sort: SortQuery = listing.DEFAULT_SORT,
    where: WhereQuery = [],  # noqa: B006
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[
        str | None, Query(description="next_cursor of the previous page, same sort")
    ] = None,
) -> JobsPublic:
    scoped = _listing_filters(filters, where, principal.team_filter)

    def page(sync_session: Session) -> JobsPublic:
        jobs, next_cursor = listing.list_jobs(
            sync_session, scoped, sort=sort, limit=limit, cursor=cursor
        )
        return JobsPublic(data=jobs_with_owner_names(sync_session, jobs), next_cursor=next_cursor)

    return await session.run_sync(page)


@router.get(
    ".csv",
    response_class=Response,  # errors stay JSON in the document; the rows are text/csv
    responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}}}},
)
async def list_jobs_csv(
    services: ServicesDep,
    principal: CurrentUser,
    filters: JobFiltersQuery,
    sort: SortQuery = listing.DEFAULT_SORT,
    where: WhereQuery = [],  # noqa: B006
    col: ColumnsQuery = [],  # noqa: B006
    limit: Annotated[int, Query(ge=1, le=MAX_ROWS)] = MAX_ROWS,
) -> CsvResponse:
    """The runs table as CSV: its columns, then each `col`, for the jobs the same filters
    and sort list (`limit` rows at most), streamed."""
    scoped = _listing_filters(filters, where, principal.team_filter)
    keys = columns.parse_keys(col)
    listing.parse_sort(sort)  # a bad sort answers 422 before the stream starts
    first = await fetch_page(services, scoped, sort, None, first_page_size(limit))
    lines = csv_lines(services, scoped, sort, keys, limit, first)
    headers = {"Content-Disposition": 'attachment; filename="runs.csv"'}
    return CsvResponse(lines, headers=headers)


@router.get("/{job_id}", response_model=JobPublic)
async def read_job(job_id: str, request: Request) -> Response:
    # The route clients poll: the presented JSON comes from memory when this process keeps
    # a fresh copy (api/live/answers.py), else from one row read; either way serialised
    # once, skipping FastAPI's second validation of the response model (the schema is
    # still documented by response_model). No dependency of its own: each one FastAPI
    # solves costs more than a kept answer, so the caller is the one the router's /v1
    # checks let through, and the id is parsed here.
    state, principal = app_state(request), checked_caller(request)
    job_uuid = await parse_job_id(job_id, request)
    body = await state.live.answers.fresh(job_uuid, principal.team_filter)
    if body is None:
        body = await _read_and_keep(state, job_uuid, principal.team_filter)
    return Response(body, media_type="application/json")


async def _read_and_keep(
    state: AppState, job_id: uuid.UUID, team_filter: uuid.UUID | None
) -> bytes:
    """The job's answer from the database, kept for the next reads unless it is queued."""
    answers = state.live.answers
    generation = answers.generation

    def read(sync_session: Session) -> JobPublic:
        job = repository.read_job_row(sync_session, job_id, team_id=team_filter)
        return job_with_queue_state(sync_session, job, state.services.settings)

    async with read_session(state.services) as session:
        public = await session.run_sync(read)
    body = public.model_dump_json().encode()
    if public.status is not JobStatus.queued:
        running = public.status is JobStatus.running
        answers.store(job_id, generation, Answer(body, public.team_id, running))
    return body


@router.post("/{job_id}/cancel", response_model=JobPublic)
def cancel_job(job_id: JobId, session: SessionDep, principal: CurrentUser) -> JobPublic:
    return JobPublic.model_validate(service.cancel_job(session, job_id, principal))


@router.patch("/{job_id}", response_model=JobPublic, responses=BODY_ERROR_RESPONSES)
def update_priority(
    job_id: JobId, update: PriorityUpdate, session: SessionDep, principal: CurrentUser
) -> JobPublic:
    return JobPublic.model_validate(
        service.set_priority(session, job_id, update.priority, principal)
    )


@router.put("/{job_id}/tags", response_model=JobPublic, responses=BODY_ERROR_RESPONSES)
def update_tags(
    job_id: JobId, update: TagsUpdate, session: SessionDep, principal: CurrentUser
) -> JobPublic:
    return JobPublic.model_validate(service.set_tags(session, job_id, update.tags, principal))


@router.get("/{job_id}/metrics", response_model=MetricsPublic)
async def read_metrics(
    job_id: JobId,
    session: ReadSessionDep,
    principal: CurrentUser,
    name: Annotated[list[str], Query()] = [],  # noqa: B006
) -> MetricsPublic:
    series = await session.run_sync(repository.metric_series, job_id, name, principal.team_filter)
    return MetricsPublic(
        job_id=job_id,
        series={
            k: [MetricPoint(step=s, value=v) for s, v in points] for k, points in series.items()
        },
    )


@router.get("/{job_id}/events", response_model=EventsPublic)
async def read_events(
    job_id: JobId, session: ReadSessionDep, principal: CurrentUser
) -> EventsPublic:
    events = await session.run_sync(repository.list_events, job_id, principal.team_filter)
    return EventsPublic(job_id=job_id, data=[EventPublic.model_validate(e) for e in events])
