"""Artifacts of a job: listed from the database, streamed from the object store.

A name is looked up in the database (with the caller's team) before any key is built, so
`../../etc/passwd` is a 404 and never a read, and no redirect is issued for another team's
file. The download itself (Content-Length, sha256, Range, HEAD, presigned redirects) is
`api/downloads.py`, shared with the model registry's downloads.

A local file's row is remembered for a few seconds (`RecentArtifacts`), so a client that
reads one file in many ranges pays one database lookup rather than one per range: the
lookup (two queries) made a small download cost about 3x a bare `FileResponse` of the same
file (bench/service.py). The file's stat is taken once, in the loop, and handed to
`FileResponse`, which reads 1 MiB at a time instead of Starlette's 64 KiB.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from cachetools import TTLCache
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from archsearch.api.auth import TOKEN_CACHE_SECONDS, CurrentUser
from archsearch.api.deps import ReadSessionDep, ServicesDep
from archsearch.api.downloads import (
    DOWNLOAD_RESPONSES,
    Served,
    from_bucket,
    local_file,
    regular_file,
)
from archsearch.api.params import JobId
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.tables import Artifact
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.store import ArtifactStore
from archsearch.schemas.artifacts import ArtifactPublic, ArtifactsPublic

router = APIRouter(prefix="/v1/jobs/{job_id}/artifacts", tags=["artifacts"])


def served_artifact(artifact: Artifact, store: ArtifactStore) -> Served:
    key = store.artifact_key(artifact.job_id, artifact.name)
    owner = f"job {artifact.job_id}"
    return Served(key, artifact.name, artifact.media_type, artifact.sha256, owner)


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
        path = store.objects.local_path(served.key)
        found = None if path is None else regular_file(path)
        if path is None or found is None or _identity(found) != identity:
            return None
        return served, path, found

    def put(
        self, job_id: uuid.UUID, served: Served, team: uuid.UUID | None, info: os.stat_result
    ) -> None:
        self._rows[(job_id, served.name, team)] = (served, _identity(info))


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
        return local_file(*local, request, store, range_header)
    # The read session of deps.get_read_session, opened only when the row is not at hand.
    async with AsyncSession(services.async_reader, expire_on_commit=False) as session:
        found = await session.run_sync(repository.get_artifact, job_id, name, team)
    artifact = served_artifact(found, store)
    path = store.objects.local_path(artifact.key)
    if path is not None:
        found_file = regular_file(path)
        if found_file is None:
            raise artifact.missing()
        _recent.put(job_id, artifact, team, found_file)
        return local_file(artifact, path, found_file, request, store, range_header)
    return await from_bucket(artifact, request, store, settings, range_header)
