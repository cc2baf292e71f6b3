"""Artifacts: the stored result files of a job."""

from __future__ import annotations

import uuid

from pydantic import BaseModel

from archsearch.schemas.common import Public, UtcDatetime


class ArtifactPublic(Public):
    """A job's file. A chart (`curves.png`, `mask-logits.png`, `spectrum.png`) is drawn on
    its first download: until then its `size` and `sha256` are null."""

    name: str
    media_type: str
    size: int | None
    sha256: str | None
    created_at: UtcDatetime


class ArtifactsPublic(BaseModel):
    job_id: uuid.UUID
    data: list[ArtifactPublic]
