"""Artifacts: the stored result files of a job."""

from __future__ import annotations

import uuid

from pydantic import BaseModel

from archsearch.schemas.common import Public, UtcDatetime


class ArtifactPublic(Public):
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: UtcDatetime


class ArtifactsPublic(BaseModel):
    job_id: uuid.UUID
    data: list[ArtifactPublic]
