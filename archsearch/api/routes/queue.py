"""The queue as the scheduler sees it, and the workers that serve it."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, SettingsDep
from archsearch.api.presenters import job_with_queue_state, worker_public
from archsearch.jobs.domain import queue_repository, worker_repository
from archsearch.schemas.jobs import JobPublic
from archsearch.schemas.queue import QueuePublic, WorkersPublic

router = APIRouter(prefix="/v1", tags=["queue"])


@router.get("/queue", response_model=QueuePublic)
async def read_queue(
    session: ReadSessionDep, principal: CurrentUser, settings: SettingsDep
) -> QueuePublic:
    """Running and waiting jobs of the caller's team (all teams for admins), and the workers."""
    team = principal.team_filter

    def read(sync_session: Session) -> QueuePublic:
        running = queue_repository.running_jobs(sync_session, team)
        waiting = queue_repository.waiting_jobs(sync_session, team)
        return QueuePublic(
            running=[JobPublic.model_validate(j) for j in running],
            waiting=[job_with_queue_state(sync_session, j, settings) for j in waiting],
            workers=[
                worker_public(w, settings) for w in worker_repository.list_workers(sync_session)
            ],
        )

    return await session.run_sync(read)


@router.get("/workers", response_model=WorkersPublic)
async def list_workers(
    session: ReadSessionDep, principal: CurrentUser, settings: SettingsDep
) -> WorkersPublic:
    records = await session.run_sync(worker_repository.list_workers)
    return WorkersPublic(data=[worker_public(w, settings) for w in records])
