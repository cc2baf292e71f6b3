"""Jobs: submit, list, read, cancel, reprioritise, and a job's metrics and events.

Every query is scoped to the caller's team (admins see all); another team's job answers
404, exactly as a job that does not exist.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Query, Response, status

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import EnqueuerDep, ReadSessionDep, SessionDep, SettingsDep
from archsearch.api.schemas import (
    EventPublic,
    EventsPublic,
    JobPublic,
    JobsPublic,
    MetricPoint,
    MetricsPublic,
    PriorityUpdate,
)
from archsearch.core.spec import JobSpec
from archsearch.jobs.domain import repository, scheduler, service
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.tables import Job, JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
Priority = Literal["low", "normal", "high", "urgent"]


async def parse_job_id(job_id: str) -> uuid.UUID:
    # A malformed id names no job: 404, like any other unknown id.
    try:
        return uuid.UUID(job_id)
    except ValueError:
        raise NotFound(f"no job {job_id}") from None


JobId = Annotated[uuid.UUID, Depends(parse_job_id)]


def with_queue_state(session, job: Job, settings) -> JobPublic:  # type: ignore[no-untyped-def]
    """`job` is an ORM Job or a plain row of the jobs table."""
    public = JobPublic.model_validate(job)
    if job.status == JobStatus.queued:
        public.queue_position = scheduler.queue_position(session, job)
        public.pending_reason = scheduler.pending_reason(
            session, job, settings, public.queue_position
        )
    return public


@router.post("", status_code=status.HTTP_201_CREATED, response_model=JobPublic)
def create_job(
    spec: Annotated[JobSpec, Body()],
    session: SessionDep,
    settings: SettingsDep,
    enqueuer: EnqueuerDep,
    principal: CurrentUser,
    response: Response,
    priority: Priority = "normal",
) -> JobPublic:
    job = service.submit_job(session, settings, enqueuer, spec, principal, priority)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return JobPublic.model_validate(job)


@router.get("", response_model=JobsPublic)
async def list_jobs(
    session: ReadSessionDep,
    principal: CurrentUser,
    status_: Annotated[list[JobStatus], Query(alias="status")] = [],  # noqa: B006
    method: Annotated[list[str], Query()] = [],  # noqa: B006
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: str | None = None,
) -> JobsPublic:
    jobs, next_cursor = await session.run_sync(
        repository.list_jobs,
        statuses=status_,
        methods=method,
        limit=limit,
        cursor=cursor,
        team_id=principal.team_filter,
    )
    return JobsPublic(data=[JobPublic.model_validate(j) for j in jobs], next_cursor=next_cursor)


@router.get("/{job_id}", response_model=JobPublic)
async def read_job(
    job_id: JobId, session: ReadSessionDep, principal: CurrentUser, settings: SettingsDep
) -> Response:
    def read(sync_session):  # type: ignore[no-untyped-def]
        job = repository.read_job_row(sync_session, job_id, team_id=principal.team_filter)
        return with_queue_state(sync_session, job, settings)

    # The hottest route (clients poll it): serialise once, skipping FastAPI's second
    # validation of the response model; the schema is still documented by response_model.
    public = await session.run_sync(read)
    return Response(public.model_dump_json(), media_type="application/json")


@router.post("/{job_id}/cancel", response_model=JobPublic)
def cancel_job(job_id: JobId, session: SessionDep, principal: CurrentUser) -> JobPublic:
    return JobPublic.model_validate(service.cancel_job(session, job_id, principal))


@router.patch("/{job_id}", response_model=JobPublic)
def update_priority(
    job_id: JobId, update: PriorityUpdate, session: SessionDep, principal: CurrentUser
) -> JobPublic:
    return JobPublic.model_validate(
        service.set_priority(session, job_id, update.priority, principal)
    )


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
