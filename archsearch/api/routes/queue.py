"""The queue as the scheduler sees it, and the workers that serve it."""

from __future__ import annotations

from fastapi import APIRouter

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, SettingsDep
from archsearch.api.routes.jobs import with_queue_state
from archsearch.api.schemas import JobPublic, QueuePublic, WorkerPublic, WorkersPublic
from archsearch.jobs.domain import scheduler, workers
from archsearch.jobs.domain.tables import as_utc, utcnow

router = APIRouter(prefix="/v1", tags=["queue"])


def _worker_public(record, settings) -> WorkerPublic:  # type: ignore[no-untyped-def]
    public = WorkerPublic.model_validate(record)
    public.heartbeat_age_seconds = (utcnow() - as_utc(record.heartbeat_at)).total_seconds()
    public.alive = public.heartbeat_age_seconds < settings.lease_seconds
    return public


@router.get("/queue", response_model=QueuePublic)
async def read_queue(
    session: ReadSessionDep, principal: CurrentUser, settings: SettingsDep
) -> QueuePublic:
    """Running and waiting jobs of the caller's team (all teams for admins), and the workers."""

    def read(sync_session):  # type: ignore[no-untyped-def]
        team = principal.team_filter
        return QueuePublic(
            running=[
                JobPublic.model_validate(j) for j in scheduler.running_jobs(sync_session, team)
            ],
            waiting=[
                with_queue_state(sync_session, j, settings)
                for j in scheduler.waiting_jobs(sync_session, team)
            ],
            workers=[_worker_public(w, settings) for w in workers.list_workers(sync_session)],
        )

    return await session.run_sync(read)  # type: ignore[no-any-return]


@router.get("/workers", response_model=WorkersPublic)
async def list_workers(
    session: ReadSessionDep, principal: CurrentUser, settings: SettingsDep
) -> WorkersPublic:
    records = await session.run_sync(workers.list_workers)
    return WorkersPublic(data=[_worker_public(w, settings) for w in records])
