"""Use cases of uploaded datasets; each owns its transaction, like `jobs.service`.

An upload is received to a temporary file, identified by its content hash and options (an
identical upload returns the stored dataset at once), read, validated, written to its final
folder, and only then recorded. Whatever fails, the temporary file goes, and a dataset folder
whose row did not commit is removed: a refused upload leaves no row and no file.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import BinaryIO

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import LOCAL_USER, Principal
from archsearch.jobs.domain.datasets import repository
from archsearch.jobs.domain.datasets.archive import MemoryBudget
from archsearch.jobs.domain.datasets.options import UploadLimits, UploadOptions, dataset_id_for
from archsearch.jobs.domain.datasets.preview import preview_png
from archsearch.jobs.domain.datasets.readers import read_upload
from archsearch.jobs.domain.datasets.storage import DatasetStore, Received
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.datasets.validate import ValidDataset, validate
from archsearch.jobs.domain.errors import (
    DatasetInUse,
    PreviewUnavailable,
)
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.platform.store import StoredFile


def dataset_store(settings: Settings) -> DatasetStore:
    return DatasetStore.for_settings(settings)


def build_dataset(
    path: Path, filename: str, options: UploadOptions, limits: UploadLimits
) -> ValidDataset:
    """Read and validate an upload already on disk (no database, no store), inside one
    memory budget shared by the reader and validation."""
    memory = MemoryBudget(limits)
    return validate(read_upload(path, filename, options, limits, memory), options, limits, memory)


def list_datasets(session: Session, principal: Principal = LOCAL_USER) -> list[UploadedDataset]:
    """The uploads the caller's team may see (all for admins)."""
    return repository.list_datasets(session, principal.team_filter)


def read_dataset(
    session: Session, dataset_id: str, principal: Principal = LOCAL_USER
) -> UploadedDataset:
    return repository.get_dataset(session, dataset_id, team_id=principal.team_filter)


def preview_path(
    session: Session, settings: Settings, dataset_id: str, principal: Principal = LOCAL_USER
) -> Path:
    """The PNG grid of an image dataset's samples; feature vectors have none."""
    dataset = read_dataset(session, dataset_id, principal)
    if dataset.kind != "images":
        shape = tuple(dataset.input_shape)
        raise PreviewUnavailable(
            f"dataset {dataset_id} holds feature vectors {shape}, not images: it has no preview"
        )
    return dataset_store(settings).preview_path(dataset.id)


def upload_dataset(
    session: Session,
    settings: Settings,
    source: BinaryIO,
    filename: str,
    options: UploadOptions,
    principal: Principal = LOCAL_USER,
) -> tuple[UploadedDataset, bool]:
    """Store an upload for the caller's team; returns the dataset and whether it is new
    (False: the same upload was stored before)."""
    principal.require("submit")
    team_id = principal.team_id
    store = dataset_store(settings)
    received = store.receive(source, settings.upload_max_bytes)
    try:
        dataset_id = dataset_id_for(received.sha256, options, team_id)
        existing = repository.find_dataset(session, dataset_id)
        if existing is not None:
            return existing, False
        valid = build_dataset(
            received.path, filename, options, UploadLimits.from_settings(settings)
        )
        return _record(
            session, store, dataset_id, valid, received, filename, options, team_id
        ), True
    finally:
        received.path.unlink(missing_ok=True)


def _record(
    session: Session,
    store: DatasetStore,
    dataset_id: str,
    valid: ValidDataset,
    received: Received,
    filename: str,
    options: UploadOptions,
    team_id: uuid.UUID | None,
) -> UploadedDataset:
    preview = (
        preview_png(valid.x_train, valid.y_train, valid.class_names)
        if valid.kind == "images"
        else None
    )
    stored = store.save(dataset_id, valid.arrays(), preview)
    try:
        row = _row(dataset_id, valid, received, filename, options, stored)
        row.team_id = team_id
        repository.add_dataset(session, row)
        session.commit()
        return row
    except IntegrityError:  # the same upload committed by a concurrent request: same files
        session.rollback()
        return repository.get_dataset(session, dataset_id)
    except BaseException:
        session.rollback()
        store.delete(dataset_id)
        raise


def _row(
    dataset_id: str,
    valid: ValidDataset,
    received: Received,
    filename: str,
    options: UploadOptions,
    stored: StoredFile,
) -> UploadedDataset:
    mean, std = valid.channel_stats()
    return UploadedDataset(
        id=dataset_id,
        name=(options.name or Path(filename).name or dataset_id)[:200],
        format=valid.format,
        kind=valid.kind,
        upload_sha256=received.sha256,
        upload_size=received.size,
        options=options.identity(),
        input_shape=list(valid.input_shape),
        num_classes=valid.num_classes,
        class_names=list(valid.class_names),
        train_size=len(valid.y_train),
        test_size=len(valid.y_test),
        class_counts=valid.class_counts(),
        mean=mean,
        std=std,
        split=valid.split,
        stored_sha256=stored.sha256,
        stored_size=stored.size,
    )


def delete_dataset(
    session: Session, settings: Settings, dataset_id: str, principal: Principal = LOCAL_USER
) -> None:
    """Refused (409) while a queued or running job trains on it; files go after the commit."""
    principal.require("submit")
    team = principal.team_filter
    dataset = repository.get_dataset(session, dataset_id, lock="update", team_id=team)
    users = repository.active_jobs_using(session, dataset_id)
    if users:
        listed = ", ".join(str(u) for u in users[:5])
        raise DatasetInUse(
            f"dataset {dataset_id} is used by {len(users)} queued or running job(s) ({listed}); "
            "cancel them or wait for them to finish, then delete it"
        )
    repository.delete_dataset(session, dataset)
    session.commit()
    dataset_store(settings).delete(dataset_id)
