"""Studies: submit, list, read (per-arm figures and Pareto front), cancel, and
the study's artifacts (results.csv, study.json, pareto.png, curves.png, report.md).

Scoped to the caller's team exactly like jobs: another team's study answers 404.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response, status
from starlette.concurrency import run_in_threadpool

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import EnqueuerDep, ReadSessionDep, SessionDep, SettingsDep, StoreDep
from archsearch.api.errors import BODY_ERROR_RESPONSES
from archsearch.api.params import StudyId
from archsearch.api.presenters import attachment
from archsearch.jobs.domain.studies import planning, service, summary
from archsearch.schemas.studies import (
    StudiesPublic,
    StudyCreate,
    StudyDetail,
    StudyPlan,
    StudyPublic,
)

router = APIRouter(prefix="/v1/studies", tags=["studies"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=StudyPublic | StudyPlan,
    responses={**BODY_ERROR_RESPONSES, 200: {"model": StudyPlan, "description": "dry run"}},
)
def create_study(
    request: Annotated[StudyCreate, Body()],
    session: SessionDep,
    settings: SettingsDep,
    enqueuer: EnqueuerDep,
    principal: CurrentUser,
    response: Response,
    dry_run: Annotated[
        bool,
        Query(
            description="check and cost the study (its jobs, their optimizer steps); queue nothing"
        ),
    ] = False,
) -> StudyPublic | StudyPlan:
    if dry_run:
        response.status_code = status.HTTP_200_OK
        return planning.plan_study(session, settings, request, principal)
    study = service.submit_study(session, settings, enqueuer, request, principal)
    response.headers["Location"] = f"/v1/studies/{study.id}"
    return summary.read_study(session, study.id, principal.team_filter)


@router.get("", response_model=StudiesPublic)
async def list_studies(
    session: ReadSessionDep,
    principal: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    id_prefix: Annotated[
        str | None,
        Query(
            pattern="^[0-9a-fA-F]{1,32}$",
            description="1 to 32 hex digits: only studies whose id (without dashes) starts so",
        ),
    ] = None,
) -> StudiesPublic:
    studies = await session.run_sync(summary.list_studies, principal.team_filter, limit, id_prefix)
    return StudiesPublic(data=studies)


@router.get("/{study_id}", response_model=StudyDetail)
async def read_study(
    study_id: StudyId, session: ReadSessionDep, principal: CurrentUser
) -> StudyDetail:
    return await session.run_sync(summary.read_study, study_id, principal.team_filter)


@router.post("/{study_id}/cancel", response_model=StudyPublic)
def cancel_study(study_id: StudyId, session: SessionDep, principal: CurrentUser) -> StudyPublic:
    service.cancel_study(session, study_id, principal)
    return summary.read_study(session, study_id, principal.team_filter)


@router.get("/{study_id}/artifacts", response_model=list[str])
async def list_study_artifacts(
    study_id: StudyId, session: ReadSessionDep, principal: CurrentUser
) -> list[str]:
    detail = await session.run_sync(summary.read_study, study_id, principal.team_filter)
    return detail.artifacts


@router.get("/{study_id}/artifacts/{name}", response_class=Response)
async def download_study_artifact(
    study_id: StudyId, name: str, session: ReadSessionDep, store: StoreDep, principal: CurrentUser
) -> Response:
    team = principal.team_filter
    key = await session.run_sync(summary.artifact_key_of, study_id, name, team)
    return attachment(await run_in_threadpool(store.objects.get_bytes, key), name)
