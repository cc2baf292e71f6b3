"""Loading a job's dataset as tensors at run time. Built-in datasets come from `core.data`;
uploaded ones (`{"id": ...}`) from the `datasets` table and the dataset store, normalised
with their stored statistics. (The submit-time check of the input shape is torch-free and
lives in the domain: `jobs.domain.validation`.)"""

from __future__ import annotations

from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.data.uploaded import uploaded_dataset, uploaded_info
from archsearch.core.spec import JobBase
from archsearch.jobs.domain.datasets import service as uploads
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services


def load_job_dataset(services: Services, spec: JobBase) -> Dataset:
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
