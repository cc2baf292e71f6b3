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


class ModelVersionUpdate(BaseModel):
    """`archived: true` folds a version away (its files stay downloadable); false restores it."""

    archived: bool


# The metrics a reader looks at first, in this order (then every other, alphabetically):
# accuracy, size (parameters, density), then the single-input latency of the compact model.
KEY_METRICS = (
    "test_accuracy",
    "parameters",
    "parameters_compact",
    "density",
    "weight_density",
    "latency_batch_1_compact_ms",
    "latency_batch_1_dense_ms",
)


def key_metric_names(metrics: dict[str, float]) -> list[str]:
    """The key metrics `metrics` holds, in reading order (one latency: the compact model's,
    else the dense one's)."""
    names = [name for name in KEY_METRICS if name in metrics]
    if "latency_batch_1_compact_ms" in names and "latency_batch_1_dense_ms" in names:
        names.remove("latency_batch_1_dense_ms")
    return names


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


class ParentPublic(BaseModel):
    """A job this version's job built on (a transfer's source, a grow job's start), and the
    model version it was promoted to, when it was."""

    field: str
    job_id: uuid.UUID
    model: str | None = None
    version: int | None = None


class ModelVersionPublic(BaseModel):
    model: str
    version: int
    description: str
    created_by: str
    created_at: UtcDatetime
    archived_at: UtcDatetime | None = None
    archived_by: str | None = None
    aliases: list[str]
    files: list[ModelFilePublic]
    lineage: Lineage
    key_metrics: list[str] = Field(
        default=[], description="the names of `lineage.metrics` to show first, in order"
    )
    study_id: uuid.UUID | None = None
    parents: list[ParentPublic] = []


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
    # Whose model it is (null in embedded mode): an admin's list holds every team's.
    team_id: uuid.UUID | None = None


class ModelDetail(ModelPublic):
    versions: list[ModelVersionPublic]
    alias_history: list[AliasEventPublic]


class ModelsPublic(BaseModel):
    data: list[ModelPublic]
