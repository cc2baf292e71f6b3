"""Database rows turned into the wire schemas of `archsearch.schemas` (jobs, workers,
datasets, webhooks), and answers that are not JSON: the usage report as CSV, a file to save.

The schemas know only pydantic; what a response adds to a row (a queued job's position and
why it waits, a worker's age, an upload's one-line summary) is computed here, and a route
answers with what a function here returns. A public form assembled from several queries
is built by its domain service instead, beside those queries: a model with its versions,
files and aliases (`models/service.py`), a study's summary (`studies/summary.py`), a
webhook's deliveries with their attempts (`webhooks/service.py`).
"""

from __future__ import annotations

import mimetypes
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from fastapi.responses import Response
from sqlalchemy.orm import Session

from archsearch.core.data.catalog import DatasetInfo
from archsearch.jobs.domain.accounts import repository as accounts_repository
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.jobs import scheduler, worker_repository
from archsearch.jobs.domain.tables import WorkerRecord
from archsearch.jobs.domain.usage import service as usage_service
from archsearch.jobs.domain.webhooks.tables import Webhook
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.datasets import DatasetPublic, UploadedDatasetPublic
from archsearch.schemas.jobs import JobPublic, JobStatus
from archsearch.schemas.queue import WorkerPublic
from archsearch.schemas.usage import UsageFormat, UsagePublic
from archsearch.schemas.webhooks import WebhookPublic, WebhooksPublic


def job_with_queue_state(session: Session, job: Any, settings: Settings) -> JobPublic:
    """A job, and for a queued one its position and why it waits.

    `job` is an ORM Job or a plain row of the jobs table (the polling path reads rows, with
    the owner's name already joined: `repository.read_job_row`).
    """
    public = JobPublic.model_validate(job)
    if not hasattr(job, "owner_name"):
        names = accounts_repository.user_names(session, [job.owner_id])
        public.owner_name = names.get(job.owner_id)
    if job.status == JobStatus.queued:
        public.queue_position = scheduler.queue_position(session, job)
        public.pending_reason = scheduler.pending_reason(
            session, job, settings, public.queue_position
        )
    return public


def jobs_with_owner_names(session: Session, jobs: Sequence[Any]) -> list[JobPublic]:
    """Jobs as the wire shows them, each with its owner's user name (one query a page)."""
    names = accounts_repository.user_names(session, (job.owner_id for job in jobs))
    public = [JobPublic.model_validate(job) for job in jobs]
    for item in public:
        item.owner_name = names.get(item.owner_id) if item.owner_id else None
    return public


def worker_public(record: WorkerRecord, settings: Settings) -> WorkerPublic:
    """A worker, alive while it was seen within one lease."""
    public = WorkerPublic.model_validate(record)
    public.busy = record.current_job_id is not None
    public.heartbeat_age_seconds = (utcnow() - record.heartbeat_at).total_seconds()
    public.alive = public.heartbeat_age_seconds < settings.lease_seconds
    return public


def workers_public(
    session: Session, settings: Settings, team_id: uuid.UUID | None, include_dead: bool = False
) -> list[WorkerPublic]:
    """The live workers (and the recently dead, if asked), scoped like jobs: a worker busy
    with another team's job shows as busy, without the job's id (team_id None: an admin,
    who sees every id)."""
    since = None if include_dead else utcnow() - timedelta(seconds=settings.lease_seconds)
    records = worker_repository.list_workers(session, seen_since=since)
    running = {r.current_job_id for r in records if r.current_job_id is not None}
    teams = worker_repository.teams_of_jobs(session, running) if team_id is not None else {}
    workers = []
    for record in records:
        public = worker_public(record, settings)
        job_id = record.current_job_id
        if team_id is not None and (job_id is None or teams.get(job_id) != team_id):
            public.current_job_id = None
        workers.append(public)
    return workers


def builtin_dataset(info: DatasetInfo) -> DatasetPublic:
    return DatasetPublic(
        name=info.name,
        description=info.description,
        input_shape=list(info.input_shape),
        num_classes=info.num_classes,
        train_size=info.train_size,
        test_size=info.test_size,
    )


def uploaded_summary(dataset: UploadedDataset) -> DatasetPublic:
    """The row of an upload in the dataset list, beside the built-ins."""
    shape = "x".join(map(str, dataset.input_shape))
    kind = f"{dataset.kind} {shape}, {dataset.num_classes} classes"
    return DatasetPublic(
        source="upload",
        id=dataset.id,
        name=dataset.name,
        input_shape=list(dataset.input_shape),
        description=f"uploaded {dataset.format} ({kind})",
        num_classes=dataset.num_classes,
        train_size=dataset.train_size,
        test_size=dataset.test_size,
    )


def uploaded_dataset(dataset: UploadedDataset) -> UploadedDatasetPublic:
    return UploadedDatasetPublic.model_validate(dataset)


def webhook_public(webhook: Webhook) -> WebhookPublic:
    """A webhook as its team reads it back: never its signing secret."""
    return WebhookPublic.model_validate(webhook)


def webhooks_public(webhooks: Sequence[Webhook]) -> WebhooksPublic:
    return WebhooksPublic(data=[webhook_public(webhook) for webhook in webhooks])


def usage_answer(usage: UsagePublic, format: UsageFormat) -> UsagePublic | Response:
    """A usage report as JSON, or as CSV: one line per group and device."""
    if format == "csv":
        return Response(usage_service.as_csv(usage), media_type="text/csv")
    return usage


def attachment(data: bytes, name: str) -> Response:
    """A file to save as `name`, typed by its extension."""
    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(data, media_type=media_type, headers=headers)
