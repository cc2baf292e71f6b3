"""The model registry: promote a succeeded job to a model version, read models and their
versions with lineage, move aliases, and download a version's files by number or alias.

Scoped to the caller's team: another team's model answers 404, like a missing one. An admin
token lists every team's models (each with `team_id`) and reads any of them by name (its own
team's first; a name that several other teams use answers 409 naming them); its changes
(promote, aliases, archive) stay in its own team. Files
are served like job artifacts (`api/downloads.py`): Content-Length, X-Content-SHA256,
Range and HEAD.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response, status
from fastapi.responses import FileResponse
from sqlalchemy.orm import Session

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, ServicesDep, SessionDep, StoreDep
from archsearch.api.downloads import DOWNLOAD_RESPONSES, serve_stored
from archsearch.api.errors import BODY_ERROR_RESPONSES
from archsearch.api.params import VersionNumber, VersionRef
from archsearch.api.served_files import Served
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.models import service
from archsearch.schemas.models import (
    AliasSet,
    ModelDetail,
    ModelsPublic,
    ModelVersionCreate,
    ModelVersionPublic,
    ModelVersionUpdate,
)

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.get("", response_model=ModelsPublic)
async def list_models(session: ReadSessionDep, principal: CurrentUser) -> ModelsPublic:
    return ModelsPublic(data=await session.run_sync(service.list_models, principal))


@router.get("/{name}", response_model=ModelDetail)
async def read_model(name: str, session: ReadSessionDep, principal: CurrentUser) -> ModelDetail:
    return await session.run_sync(service.read_model, principal, name)


@router.post(
    "/{name}/versions",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelVersionPublic,
    responses=BODY_ERROR_RESPONSES,
)
def create_version(
    name: str,
    request: Annotated[ModelVersionCreate, Body()],
    session: SessionDep,
    store: StoreDep,
    principal: CurrentUser,
    response: Response,
) -> ModelVersionPublic:
    """Promote a succeeded job's artifacts to the next version of `name` (created if new)."""
    promoted = service.promote(session, store, principal, name, request.job_id, request.description)
    number = promoted.version.version
    response.headers["Location"] = f"/v1/models/{name}/versions/{number}"
    return service.read_version(session, principal, name, str(number))


@router.get("/{name}/versions/{version}", response_model=ModelVersionPublic)
async def read_version(
    name: str, version: VersionNumber, session: ReadSessionDep, principal: CurrentUser
) -> ModelVersionPublic:
    return await session.run_sync(service.read_version, principal, name, str(version))


@router.patch(
    "/{name}/versions/{version}",
    response_model=ModelVersionPublic,
    responses=BODY_ERROR_RESPONSES,
)
def update_version(
    name: str,
    version: VersionNumber,
    request: Annotated[ModelVersionUpdate, Body()],
    session: SessionDep,
    principal: CurrentUser,
) -> ModelVersionPublic:
    """Archive a version (`{"archived": true}`; 409 while an alias points at it) or restore
    it. An archived version keeps its files; no alias may point at it."""
    service.archive(session, principal, name, version, request.archived)
    return service.read_version(session, principal, name, str(version))


@router.get("/{name}/aliases/{alias}", response_model=ModelVersionPublic)
async def read_alias(
    name: str, alias: str, session: ReadSessionDep, principal: CurrentUser
) -> ModelVersionPublic:
    """The version the alias points at."""
    return await session.run_sync(service.read_version, principal, name, alias)


@router.put("/{name}/aliases/{alias}", response_model=ModelDetail, responses=BODY_ERROR_RESPONSES)
def set_alias(
    name: str,
    alias: str,
    request: Annotated[AliasSet, Body()],
    session: SessionDep,
    principal: CurrentUser,
) -> ModelDetail:
    service.set_alias(session, principal, name, alias, request.version)
    return service.read_model(session, principal, name)


@router.delete("/{name}/aliases/{alias}", response_model=ModelDetail)
def remove_alias(name: str, alias: str, session: SessionDep, principal: CurrentUser) -> ModelDetail:
    service.remove_alias(session, principal, name, alias)
    return service.read_model(session, principal, name)


@router.get(
    "/{name}/{by}/{ref}/artifacts/{file}",
    response_class=FileResponse,
    responses=DOWNLOAD_RESPONSES,
)
@router.head("/{name}/{by}/{ref}/artifacts/{file}", include_in_schema=False)
async def download_model_file(
    name: str,
    file: str,
    request: Request,
    session: ReadSessionDep,
    services: ServicesDep,
    principal: CurrentUser,
    ref: VersionRef,
) -> Response:
    """A file of a model version, the version named by number or by alias."""
    served = await session.run_sync(_served, principal, name, ref, file)
    return await serve_stored(served, request, services.store, services.settings)


def _served(session: Session, principal: Principal, name: str, ref: str, file: str) -> Served:
    version, found = service.version_file(session, principal, name, ref, file)
    owner = f"model {name!r} version {version.version}"
    return Served(found.object_key, found.name, found.media_type, found.sha256, owner)
