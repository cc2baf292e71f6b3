"""The queue as the scheduler sees it, and the workers that serve it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy.orm import Session

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, SettingsDep
from archsearch.api.presenters import job_with_queue_state, workers_public
from archsearch.jobs.domain.errors import Forbidden
from archsearch.jobs.domain.jobs import queue_repository, team_state
from archsearch.schemas.jobs import JobPublic
from archsearch.schemas.queue import QueuePublic, WorkersPublic

router = APIRouter(prefix="/v1", tags=["queue"])


@router.get("/queue", response_model=QueuePublic)
async def read_queue(
    session: ReadSessionDep, principal: CurrentUser, settings: SettingsDep
) -> QueuePublic:
    """Running and waiting jobs of the caller's team (all teams for admins), the live
    workers, which show another team's job only as `busy`, and the team's limits and hold."""
    team = principal.team_filter

    def read(sync_session: Session) -> QueuePublic:
        running = queue_repository.running_jobs(sync_session, team)
        waiting = queue_repository.waiting_jobs(sync_session, team)
        return QueuePublic(
            running=[JobPublic.model_validate(j) for j in running],
            waiting=[job_with_queue_state(sync_session, j, settings) for j in waiting],
            workers=workers_public(sync_session, settings, team),
            teams=team_state.team_quotas(sync_session, settings, team),
        )

    return await session.run_sync(read)


@router.get("/workers", response_model=WorkersPublic)
async def list_workers(
    session: ReadSessionDep,
    principal: CurrentUser,
    settings: SettingsDep,
    include_dead: Annotated[
        bool, Query(description="admins only: also workers silent for up to an hour")
    ] = False,
) -> WorkersPublic:
    """The live workers; another team's job on one shows as `busy` without its id."""
    if include_dead and not principal.is_admin:
        raise Forbidden("include_dead=true needs an admin token")
    workers = await session.run_sync(workers_public, settings, principal.team_filter, include_dead)
    return WorkersPublic(data=workers)
