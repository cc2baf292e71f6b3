"""Resolving a job's dataset reference: at submit time (input shape, torch-free) and at run
time (tensors). Built-in datasets come from `core.data`; uploaded ones (`{"id": ...}`) from
the `datasets` table and the dataset store, normalised with their stored statistics."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from archsearch.core.data.catalog import require_available
from archsearch.core.spec import JobBase
from archsearch.jobs.domain.datasets import service as uploads
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.settings import Settings

if TYPE_CHECKING:  # torch stays out of the API process
    from archsearch.core.data.loaders import Dataset
    from archsearch.jobs.platform.services import Services


def dataset_input_shape(
    session: Session, spec: JobBase, settings: Settings, team_id: uuid.UUID | None = None
) -> tuple[int, ...]:
    """The input shape of the job's dataset; raises a UserError naming the field if unusable.
    With `team_id`, only that team's uploads are found."""
    ref = spec.dataset
    if ref.id is not None:
        return uploads.input_shape_for_job(session, ref.id, team_id)
    assert ref.name is not None, "DatasetRef holds exactly one of name and id"
    return require_available(ref.name, settings.data_dirs).input_shape


def load_job_dataset(services: Services, spec: JobBase) -> Dataset:
    from archsearch.core.data.loaders import load_dataset
    from archsearch.core.data.uploaded import uploaded_dataset, uploaded_info

    ref = spec.dataset
    if ref.id is None:
        return load_dataset(ref, services.settings.data_dirs, seed=spec.training.seed)
    with transaction(services.sessions) as session:
        row, arrays = uploads.arrays_for_job(session, services.settings, ref.id)
        info = uploaded_info(
            row.id,
            row.name,
            row.input_shape,
            row.num_classes,
            row.train_size,
            row.test_size,
            row.mean,
            row.std,
        )
    return uploaded_dataset(info, arrays, ref, seed=spec.training.seed)
