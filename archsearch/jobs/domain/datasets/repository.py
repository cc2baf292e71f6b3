"""All SQL of uploaded datasets. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.errors import DatasetNotFound
from archsearch.jobs.domain.tables import Job
from archsearch.schemas.jobs import JobStatus

ACTIVE = (JobStatus.queued, JobStatus.running)


def find_dataset(
    session: Session, dataset_id: str, *, lock: str | None = None, team_id: uuid.UUID | None = None
) -> UploadedDataset | None:
    """`lock='share'` keeps the row from being deleted until the caller commits (job submit);
    `lock='update'` is the delete's side of that handshake. SQLite ignores both (it has one writer).
    With `team_id`, another team's dataset is not found."""
    query = select(UploadedDataset).where(UploadedDataset.id == dataset_id)
    if team_id is not None:
        query = query.where(UploadedDataset.team_id == team_id)
    if lock is not None:
        query = query.with_for_update(read=lock == "share")
    return session.scalars(query).one_or_none()


def get_dataset(
    session: Session, dataset_id: str, *, lock: str | None = None, team_id: uuid.UUID | None = None
) -> UploadedDataset:
    dataset = find_dataset(session, dataset_id, lock=lock, team_id=team_id)
    if dataset is None:
        raise DatasetNotFound(f"no dataset {dataset_id!r}; GET /v1/datasets lists them")
    return dataset


def add_dataset(session: Session, dataset: UploadedDataset) -> UploadedDataset:
    session.add(dataset)
    session.flush()
    return dataset


def list_datasets(session: Session, team_id: uuid.UUID | None = None) -> list[UploadedDataset]:
    query = select(UploadedDataset).order_by(UploadedDataset.created_at, UploadedDataset.id)
    if team_id is not None:
        query = query.where(UploadedDataset.team_id == team_id)
    return list(session.scalars(query))


def active_jobs_using(session: Session, dataset_id: str) -> list[uuid.UUID]:
    """Queued or running jobs whose spec trains on the dataset."""
    used = Job.spec[("dataset", "id")].as_string() == dataset_id
    query = select(Job.id).where(Job.status.in_(ACTIVE), used).order_by(Job.created_at)
    return list(session.scalars(query))


def delete_dataset(session: Session, dataset: UploadedDataset) -> None:
    session.delete(dataset)
    session.flush()


def existing_dataset_ids(session: Session, dataset_ids: set[str]) -> set[str]:
    """Those of `dataset_ids` that have a row."""
    query = select(UploadedDataset.id).where(UploadedDataset.id.in_(dataset_ids))
    return set(session.scalars(query))
