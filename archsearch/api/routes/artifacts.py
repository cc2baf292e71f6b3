"""Artifacts of a job: listed from the database, streamed from the object store.

A name is looked up in the database (with the caller's team) before any key is built, so
`../../etc/passwd` is a 404 and never a read, and no redirect is issued for another team's
file. The download itself (Content-Length, sha256, Range, HEAD, presigned redirects) is
`api/downloads.py`, shared with the model registry's downloads. A chart not drawn yet
(`jobs.domain.jobs.charts`) is drawn and stored on its first download, in a worker thread.

A local file's row is remembered for a few seconds (`served_files.RecentArtifacts`), so a
client that reads one file in many ranges pays one database lookup rather than one per
range: the lookup (two queries) made a small download cost about 3x a bare `FileResponse`
of the same file (bench/service.py). The file's stat is taken once, in the loop, and handed to
`FileResponse`, which reads 1 MiB at a time instead of Starlette's 64 KiB.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.concurrency import run_in_threadpool

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, ServicesDep, app_state
from archsearch.api.downloads import DOWNLOAD_RESPONSES, from_bucket, local_file
from archsearch.api.params import JobId
from archsearch.api.served_files import Served, regular_file
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.jobs import charts, repository
from archsearch.jobs.domain.tables import Artifact
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services
from archsearch.schemas.artifacts import ArtifactPublic, ArtifactsPublic

router = APIRouter(prefix="/v1/jobs/{job_id}/artifacts", tags=["artifacts"])


@router.get("", response_model=ArtifactsPublic)
async def list_artifacts(
    job_id: JobId, session: ReadSessionDep, principal: CurrentUser
) -> ArtifactsPublic:
    artifacts = await session.run_sync(repository.list_artifacts, job_id, principal.team_filter)
    return ArtifactsPublic(
        job_id=job_id, data=[ArtifactPublic.model_validate(a) for a in artifacts]
    )


@router.get("/{name}", response_class=FileResponse, responses=DOWNLOAD_RESPONSES)
async def download_artifact(
    job_id: JobId, name: str, request: Request, services: ServicesDep, principal: CurrentUser
) -> Response:
    return await _answer(job_id, name, request, services, principal)


@router.head("/{name}", response_class=Response, responses=DOWNLOAD_RESPONSES)
async def artifact_headers(
    job_id: JobId, name: str, request: Request, services: ServicesDep, principal: CurrentUser
) -> Response:
    """The headers a GET would answer (size, sha256, ranges), without the body."""
    return await _answer(job_id, name, request, services, principal)


async def _answer(
    job_id: uuid.UUID, name: str, request: Request, services: Services, principal: Principal
) -> Response:
    team, range_header = principal.team_filter, request.headers.get("range")
    store, settings = services.store, services.settings
    recent = app_state(request).recent_artifacts
    local = recent.get(job_id, name, team, store)
    if local is not None:
        return local_file(*local, request, store, range_header)
    # The read session of deps.get_read_session, opened only when the row is not at hand.
    async with AsyncSession(services.async_reader, expire_on_commit=False) as session:
        found = await session.run_sync(repository.get_artifact, job_id, name, team)
    if charts.is_pending(found):
        found = await run_in_threadpool(_drawn, services, job_id, name)
    artifact = Served.of(found, store)
    path = store.objects.local_path(artifact.key)
    if path is not None:
        found_file = regular_file(path)
        if found_file is None:
            raise artifact.missing()
        recent.put(job_id, artifact, team, found_file)
        return local_file(artifact, path, found_file, request, store, range_header)
    return await from_bucket(artifact, request, store, settings, range_header)


def _drawn(services: Services, job_id: uuid.UUID, name: str) -> Artifact:
    """The chart drawn and stored (`jobs.domain.jobs.charts`), read again in a write
    transaction: a concurrent first download may have drawn it meanwhile."""
    with transaction(services.sessions) as session:
        artifact = repository.get_artifact(session, job_id, name)
        if charts.is_pending(artifact):
            artifact = charts.draw_chart(session, services.store, artifact)
        session.expunge(artifact)
    return artifact
