"""The model registry on the wire: models, immutable versions with lineage, and aliases."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field

from archsearch.schemas.common import Public, UtcDatetime

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
ALIAS_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"  # never all digits: `name@3` is a version


class ModelVersionCreate(BaseModel):
    job_id: uuid.UUID
    description: str = Field(default="", max_length=2000)


class AliasSet(BaseModel):
    version: int = Field(ge=1)


class ModelFilePublic(Public):
    name: str
    media_type: str
    size: int
    sha256: str


class Lineage(BaseModel):
    """What a version was made from, frozen when it was promoted."""

    job_id: uuid.UUID
    method: str
    spec: dict[str, Any]
    dataset: dict[str, Any] | None = None
    dataset_sha256: str | None = None
    archsearch_version: str
    metrics: dict[str, float] = {}
    model_card: str | None = None


class ModelVersionPublic(BaseModel):
    model: str
    version: int
    description: str
    created_by: str
    created_at: UtcDatetime
    aliases: list[str]
    files: list[ModelFilePublic]
    lineage: Lineage


class AliasPublic(Public):
    alias: str
    version: int
    updated_by: str
    updated_at: UtcDatetime


class AliasEventPublic(Public):
    """One alias change: `to_version` null means the alias was removed."""

    alias: str
    from_version: int | None
    to_version: int | None
    actor: str
    at: UtcDatetime


class ModelPublic(BaseModel):
    name: str
    latest_version: int
    created_by: str
    created_at: UtcDatetime
    updated_at: UtcDatetime
    aliases: list[AliasPublic]


class ModelDetail(ModelPublic):
    versions: list[ModelVersionPublic]
    alias_history: list[AliasEventPublic]


class ModelsPublic(BaseModel):
    data: list[ModelPublic]
