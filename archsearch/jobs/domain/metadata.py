"""Every table of the domain on one metadata: what Alembic targets, and what a session
needs to resolve foreign keys across rooms (a job's owner and team live in accounts)."""

from __future__ import annotations

from archsearch.jobs.domain.accounts.tables import ApiToken, Team, User
from archsearch.jobs.domain.base import Base
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.joblogs.tables import JobLogLine
from archsearch.jobs.domain.models.tables import (
    ModelAlias,
    ModelAliasEvent,
    ModelVersion,
    ModelVersionFile,
    RegisteredModel,
)
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Artifact, Job, JobEvent, Metric, WorkerRecord
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.jobs.domain.webhooks.tables import (
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
)

metadata = Base.metadata

ALL_TABLES = (
    Job,
    JobEvent,
    Metric,
    Artifact,
    WorkerRecord,
    Team,
    User,
    ApiToken,
    UploadedDataset,
    JobLogLine,
    Study,
    RegisteredModel,
    ModelVersion,
    ModelVersionFile,
    ModelAlias,
    ModelAliasEvent,
    Webhook,
    WebhookEvent,
    WebhookDelivery,
    WebhookAttempt,
    JobAttempt,
)
