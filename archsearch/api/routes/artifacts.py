"""Artifacts of a job: listed from the database, streamed from the store.

A name is looked up in the database before any path is built, so `../../etc/passwd` is a
404 and never a file read. Downloads carry Content-Length, the sha256 and Range support.
"""

from __future__ import annotations

import base64

from fastapi import APIRouter
from fastapi.responses import FileResponse

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, StoreDep
from archsearch.api.params import JobId
from archsearch.jobs.domain import repository
from archsearch.jobs.domain.errors import NotFound
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


@router.get("/{name}", response_class=FileResponse)
async def download_artifact(
    job_id: JobId, name: str, session: ReadSessionDep, store: StoreDep, principal: CurrentUser
) -> FileResponse:
    artifact = await session.run_sync(repository.get_artifact, job_id, name, principal.team_filter)
    path = store.artifact_path(job_id, artifact.name)
    if not path.is_file():
        raise NotFound(f"artifact {name!r} of job {job_id} is recorded but its file is missing")
    digest = base64.b64encode(bytes.fromhex(artifact.sha256)).decode()
    return FileResponse(
        path,
        media_type=artifact.media_type,
        filename=artifact.name,
        headers={"X-Content-SHA256": artifact.sha256, "Repr-Digest": f"sha-256=:{digest}:"},
    )
