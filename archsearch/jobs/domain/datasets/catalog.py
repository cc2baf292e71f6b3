"""The one dataset catalog of the domain: what a team may name in a job, and its facts.

A job names a built-in dataset (`{"name": "mnist"}`, its files in this deployment's data
folders) or one of its team's uploads (`{"id": "ds-..."}`). Submitting a job, planning a
study, listing datasets and loading a run's data all resolve a reference here, with the same
rules: another team's upload is not found, and a missing one is refused with what to do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.orm import Session

from archsearch.core.data.catalog import DatasetInfo, available_datasets, require_available
from archsearch.jobs.domain.datasets import repository
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.errors import UnknownUploadedDataset
from archsearch.jobs.platform.settings import Settings
from archsearch.specs import DatasetRef


@dataclass(frozen=True)
class DatasetFacts:
    """What planning and validation need of a dataset, built-in or uploaded alike."""

    input_shape: tuple[int, ...]
    num_classes: int
    train_size: int


def resolve(
    session: Session,
    settings: Settings,
    ref: DatasetRef,
    team_id: uuid.UUID | None = None,
    *,
    hold: bool = False,
) -> DatasetFacts:
    """The facts of the dataset `ref` names, as the team `team_id` sees it (None: any team).

    `hold=True` at submit: an upload's row stays locked (shared) until the job is committed,
    so a concurrent delete either waits and sees the job, or wins first."""
    if ref.id is None:
        assert ref.name is not None, "a dataset ref names a built-in or an upload"
        info = built_in_info(settings, ref.name)
        return DatasetFacts(info.input_shape, info.num_classes, info.train_size)
    row = uploaded(session, ref.id, team_id, lock="share" if hold else None)
    return DatasetFacts(tuple(row.input_shape), row.num_classes, row.train_size)


def uploaded(
    session: Session,
    dataset_id: str,
    team_id: uuid.UUID | None = None,
    *,
    lock: Literal["share"] | None = None,
) -> UploadedDataset:
    """The upload's row; a missing one (or another team's) is refused with what to do."""
    row = repository.find_dataset(session, dataset_id, lock=lock, team_id=team_id)
    if row is None:
        raise UnknownUploadedDataset(
            f"no uploaded dataset {dataset_id!r}; upload one with POST /v1/datasets "
            "or list them with GET /v1/datasets"
        )
    return row


def built_in_info(settings: Settings, name: str) -> DatasetInfo:
    """A built-in dataset whose files this deployment has; refused with where they were
    looked for, or with the names there are."""
    return require_available(name, settings.data_dirs)


def built_in(settings: Settings) -> list[DatasetInfo]:
    """The built-in datasets whose files this deployment has."""
    return available_datasets(settings.data_dirs)
