"""Artifacts of a job: listed from the database, streamed from the object store.

A name is looked up in the database (with the caller's team) before any key is built, so
`../../etc/passwd` is a 404 and never a read, and no redirect is issued for another team's
file. Downloads carry Content-Length, the sha256 and Range support: a local file goes out
as a `FileResponse`, an S3 object is streamed from ranged GETs (`api/ranges.py`), or, when
`download_redirect_seconds` is set, redirected to a presigned URL valid that long. HEAD
answers the headers a GET would, without a body (and without a redirect: a presigned URL
is signed for GET).

A local file's row is remembered for a few seconds (`RecentArtifacts`), so a client that
reads one file in many ranges pays one database lookup rather than one per range: the
lookup (two queries) made a small download cost about 3x a bare `FileResponse` of the same
file (bench/service.py). The file's stat is taken once, in the loop, and handed to
`FileResponse`, which reads 1 MiB at a time instead of Starlette's 64 KiB.
"""

from __future__ import annotations

import base64
import os
import stat
import uuid
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.concurrency import run_in_threadpool

from archsearch.api.auth import TOKEN_CACHE_SECONDS, CurrentUser
from archsearch.api.deps import ReadSessionDep, ServicesDep
from archsearch.api.params import JobId
from archsearch.api.ranges import stream_object
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.tables import Artifact
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


@dataclass(frozen=True)
class Served:
    """What a download needs of an artifact row, detached from any session."""

    job_id: uuid.UUID
    name: str
    media_type: str
    sha256: str

    @classmethod
    def of(cls, artifact: Artifact) -> Served:
        return cls(artifact.job_id, artifact.name, artifact.media_type, artifact.sha256)

    def headers(self) -> dict[str, str]:
        digest = base64.b64encode(bytes.fromhex(self.sha256)).decode()
        return {"X-Content-SHA256": self.sha256, "Repr-Digest": f"sha-256=:{digest}:"}

    def missing(self) -> NotFound:
        return NotFound(
            f"artifact {self.name!r} of job {self.job_id} is recorded but its file is missing"
        )


def _regular_file(path: os.PathLike[str]) -> os.stat_result | None:
    """The file's stat (a local syscall: cheaper in the loop than a thread hop), or None."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found if stat.S_ISREG(found.st_mode) else None


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    # Every write renames a new file into place (objects/local.py): a rewritten artifact
    # has a new inode, so its old row can never be served with the new bytes.
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


class RecentArtifacts:
    """Rows of local files served in the last `seconds`, per (job, name, caller's team).

    A hit is used only while the file is the very one stat'ed when the row was read; a
    deleted or rewritten file goes back to the database. Like a cached token, a deleted
    job's file stops being served within `seconds` even if the file lingers."""

    def __init__(self, seconds: float = TOKEN_CACHE_SECONDS, size: int = 10_000) -> None:
        self._rows: TTLCache[tuple[Any, ...], tuple[Served, tuple[int, ...]]] = TTLCache(
            maxsize=size, ttl=seconds
        )

    def get(
        self, job_id: uuid.UUID, name: str, team: uuid.UUID | None, store: ArtifactStore
    ) -> tuple[Served, os.PathLike[str], os.stat_result] | None:
        entry = self._rows.get((job_id, name, team))
        if entry is None:
            return None
        served, identity = entry
        path = store.objects.local_path(store.artifact_key(job_id, served.name))
        found = None if path is None else _regular_file(path)
        if path is None or found is None or _identity(found) != identity:
            return None
        return served, path, found

    def put(self, served: Served, team: uuid.UUID | None, info: os.stat_result) -> None:
        self._rows[(served.job_id, served.name, team)] = (served, _identity(info))


_recent = RecentArtifacts()


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
    local = _recent.get(job_id, name, team, store)
    if local is not None:
        return _local_file(*local, request, store, range_header)
    # The read session of deps.get_read_session, opened only when the row is not at hand.
    async with AsyncSession(services.async_reader, expire_on_commit=False) as session:
        found = await session.run_sync(repository.get_artifact, job_id, name, team)
    artifact = Served.of(found)
    key = store.artifact_key(job_id, artifact.name)
    path = store.objects.local_path(key)
    if path is not None:
        found_file = _regular_file(path)
        if found_file is None:
            raise artifact.missing()
        _recent.put(artifact, team, found_file)
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
