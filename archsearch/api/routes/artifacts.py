"""Artifacts of a job: listed from the database, streamed from the object store.

A name is looked up in the database (with the caller's team) before any key is built, so
`../../etc/passwd` is a 404 and never a read, and no redirect is issued for another team's
file. Downloads carry Content-Length, the sha256 and Range support: a local file goes out
as a `FileResponse`, an S3 object is streamed from ranged GETs (`api/ranges.py`), or, when
`download_redirect_seconds` is set, redirected to a presigned URL valid that long.
"""

from __future__ import annotations

import base64

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, SettingsDep, StoreDep
from archsearch.api.params import JobId
from archsearch.api.ranges import stream_object
from archsearch.jobs.domain import repository
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.tables import Artifact
from archsearch.schemas.artifacts import ArtifactPublic, ArtifactsPublic
from archsearch.schemas.errors import ErrorBody

router = APIRouter(prefix="/v1/jobs/{job_id}/artifacts", tags=["artifacts"])


@router.get("", response_model=ArtifactsPublic)
async def list_artifacts(
    job_id: JobId, session: ReadSessionDep, principal: CurrentUser
) -> ArtifactsPublic:
    artifacts = await session.run_sync(repository.list_artifacts, job_id, principal.team_filter)
    return ArtifactsPublic(
        job_id=job_id, data=[ArtifactPublic.model_validate(a) for a in artifacts]
    )


@router.get(
    "/{name}",
    response_class=FileResponse,
    responses={
        206: {"description": "the asked range"},
        307: {"description": "presigned URL"},
        416: {"model": ErrorBody, "description": "a range outside the file"},
    },
)
async def download_artifact(
    job_id: JobId,
    name: str,
    request: Request,
    session: ReadSessionDep,
    store: StoreDep,
    settings: SettingsDep,
    principal: CurrentUser,
) -> Response:
    artifact = await session.run_sync(repository.get_artifact, job_id, name, principal.team_filter)
    key = store.artifact_key(job_id, artifact.name)
    headers = _digest_headers(artifact)
    path = store.objects.local_path(key)
    range_header = request.headers.get("range")
    if path is not None:
        if not path.is_file():
            raise _missing(artifact)
        if range_header is None:
            return FileResponse(
                path, media_type=artifact.media_type, filename=artifact.name, headers=headers
            )
        # A range is served by the same rules as from S3 (api/ranges.py), not Starlette's.
        headers["Content-Disposition"] = f'attachment; filename="{artifact.name}"'
        file_size = path.stat().st_size
        return stream_object(
            store.objects, key, file_size, range_header, artifact.media_type, headers
        )
    if settings.download_redirect_seconds:
        seconds = settings.download_redirect_seconds
        url = await run_in_threadpool(store.objects.presigned_url, key, seconds, artifact.name)
        if url is not None:
            return RedirectResponse(url, status_code=307, headers=headers)
    size = await run_in_threadpool(store.objects.size, key)
    if size is None:
        raise _missing(artifact)
    headers["Content-Disposition"] = f'attachment; filename="{artifact.name}"'
    return stream_object(store.objects, key, size, range_header, artifact.media_type, headers)


def _digest_headers(artifact: Artifact) -> dict[str, str]:
    digest = base64.b64encode(bytes.fromhex(artifact.sha256)).decode()
    return {"X-Content-SHA256": artifact.sha256, "Repr-Digest": f"sha-256=:{digest}:"}


def _missing(artifact: Artifact) -> NotFound:
    return NotFound(
        f"artifact {artifact.name!r} of job {artifact.job_id} is recorded but its file is missing"
    )
