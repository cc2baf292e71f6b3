"""Datasets: the list (built-ins beside uploads) and an upload's full record."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from archsearch.schemas.common import Public, UtcDatetime


class DatasetPublic(BaseModel):
    """A dataset jobs can train on: built in (`{"name": ...}`) or uploaded (`{"id": ...}`)."""

    source: str = "builtin"  # builtin | upload
    id: str | None = None  # uploads only: what a job's `dataset.id` names
    name: str
    description: str
    input_shape: list[int]
    num_classes: int
    train_size: int
    test_size: int


class DatasetsPublic(BaseModel):
    data: list[DatasetPublic]


class UploadedDatasetPublic(Public):
    """An upload's metadata and the statistics the worker normalises with."""

    id: str
    source: str = "upload"
    name: str
    format: str
    kind: str
    input_shape: list[int]
    num_classes: int
    class_names: list[str]
    train_size: int
    test_size: int
    class_counts: dict[str, list[int]]
    mean: list[float]
    std: list[float]
    split: dict[str, Any]
    options: dict[str, Any]
    upload_sha256: str
    upload_size: int
    stored_size: int
    created_at: UtcDatetime
