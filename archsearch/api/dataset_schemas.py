"""Public shapes of uploaded datasets (`GET /v1/datasets/{id}`, `POST /v1/datasets`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from archsearch.api.schemas import DatasetPublic, Public


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
    created_at: datetime


def summary(dataset: UploadedDatasetPublic) -> DatasetPublic:
    """The row of an upload in the dataset list, beside the built-ins."""
    shape = "x".join(map(str, dataset.input_shape))
    return DatasetPublic(
        source="upload",
        id=dataset.id,
        name=dataset.name,
        input_shape=dataset.input_shape,
        description=f"uploaded {dataset.format} ({dataset.kind} {shape}, {dataset.num_classes} classes)",
        num_classes=dataset.num_classes,
        train_size=dataset.train_size,
        test_size=dataset.test_size,
    )
