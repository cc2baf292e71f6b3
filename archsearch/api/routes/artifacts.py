"""Artifacts of a job: listed from the database, streamed from the object store.

A name is looked up in the database (with the caller's team) before any key is built, so
`../../etc/passwd` is a 404 and never a read, and no redirect is issued for another team's
file. Downloads carry Content-Length, the sha256 and Range support: a local file goes out
as a `FileResponse`, an S3 object is streamed from ranged GETs (`api/ranges.py`), or, when
`download_redirect_seconds` is set, redirected to a presigned URL valid that long. HEAD
answers the headers a GET would, without a body (and without a redirect: a presigned URL
is signed for GET).

A local file's row is remembered for a few seconds (`served_files.RecentArtifacts`), so a
client that reads one file in many ranges pays one database lookup rather than one per
range: the lookup (two queries) made a small download cost about 3x a bare `FileResponse`
of the same file (bench/service.py). The file's stat is taken once, in the loop, and handed to
`FileResponse`, which reads 1 MiB at a time instead of Starlette's 64 KiB.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.concurrency import run_in_threadpool

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, ServicesDep, app_state
from archsearch.api.params import JobId
from archsearch.api.ranges import stream_object
from archsearch.api.served_files import Served, regular_file
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.platform.objects import CHUNK
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.platform.store import ArtifactStore
from archsearch.schemas.artifacts import ArtifactPublic, ArtifactsPublic
from archsearch.schemas.errors import ErrorBody

router = APIRouter(prefix="/v1/jobs/{job_id}/artifacts", tags=["artifacts"])
DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    206: {"description": "the asked range"},
    307: {"description": "presigned URL (GET only)"},
    416: {"model": ErrorBody, "description": "a range outside the file"},
}


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
        return _local_file(*local, request, store, range_header)
    # The read session of deps.get_read_session, opened only when the row is not at hand.
    async with AsyncSession(services.async_reader, expire_on_commit=False) as session:
        found = await session.run_sync(repository.get_artifact, job_id, name, team)
    artifact = Served.of(found)
    key = store.artifact_key(job_id, artifact.name)
    path = store.objects.local_path(key)
    if path is not None:
        found_file = regular_file(path)
        if found_file is None:
            raise artifact.missing()
        recent.put(artifact, team, found_file)
        return _local_file(artifact, path, found_file, request, store, range_header)
    return await _from_bucket(artifact, key, request, store, settings, range_header)


def _local_file(
    artifact: Served,
    path: os.PathLike[str],
    info: os.stat_result,
    request: Request,
    store: ArtifactStore,
    range_header: str | None,
) -> Response:
    headers = artifact.headers()
    if range_header is None:
        # The lookup's stat goes along, so Starlette does not stat again in a thread.
        response = FileResponse(
            path,
            media_type=artifact.media_type,
            filename=artifact.name,
            headers=headers,
            stat_result=info,
        )
        response.chunk_size = CHUNK  # 1 MiB reads: 16x fewer thread hops than 64 KiB
        return response
    # A range is served by the same rules as from S3 (api/ranges.py), not Starlette's.
    headers["Content-Disposition"] = f'attachment; filename="{artifact.name}"'
    key = store.artifact_key(artifact.job_id, artifact.name)
    part = stream_object(
        store.objects, key, info.st_size, range_header, artifact.media_type, headers
    )
    return _headers_only(part) if request.method == "HEAD" else part


async def _from_bucket(
    artifact: Served,
    key: str,
    request: Request,
    store: ArtifactStore,
    settings: Settings,
    range_header: str | None,
) -> Response:
    headers, head = artifact.headers(), request.method == "HEAD"
    if settings.download_redirect_seconds and not head:  # a presigned URL is for GET only
        seconds = settings.download_redirect_seconds
        url = await run_in_threadpool(store.objects.presigned_url, key, seconds, artifact.name)
        if url is not None:
            return RedirectResponse(url, status_code=307, headers=headers)
    size = await run_in_threadpool(store.objects.size, key)
    if size is None:
        raise artifact.missing()
    headers["Content-Disposition"] = f'attachment; filename="{artifact.name}"'
    response = stream_object(store.objects, key, size, range_header, artifact.media_type, headers)
    return _headers_only(response) if head else response


def _headers_only(response: Response) -> Response:
    """A HEAD answer: the status and headers of the streamed answer, its body never read
    (the object store's iterator is a generator that has not started)."""
    return Response(status_code=response.status_code, headers=dict(response.headers))
