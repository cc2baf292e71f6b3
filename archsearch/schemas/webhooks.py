"""Webhooks on the wire: subscriptions, and the log of their deliveries."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from archsearch.schemas.common import Public, UtcDatetime

WebhookEventName = Literal[
    "job.succeeded",
    "job.failed",
    "job.cancelled",
    "job.pruned",
    "job.warning",
    "job.preempted",
    "study.finished",
    "model.version_created",
    "model.alias_changed",
]
BodyFormat = Literal["json", "slack"]


class WebhookCreate(BaseModel):
    model_config = ConfigDict(hide_input_in_errors=True)  # an error never echoes the secret

    url: str = Field(max_length=2000)
    events: list[WebhookEventName] = Field(min_length=1)
    # Unset: the server makes one and shows it once, in the answer to this request.
    secret: str | None = Field(default=None, min_length=16, max_length=200, repr=False)
    format: BodyFormat = "json"


class WebhookPublic(Public):
    id: uuid.UUID
    url: str
    events: list[str]
    # Read from the row's `body_format`, and back from the wire's `format` by the client.
    format: BodyFormat = Field(validation_alias=AliasChoices("body_format", "format"))
    created_by: str
    created_at: UtcDatetime
    # Whose webhook it is (null in embedded mode): an admin's list holds every team's.
    team_id: uuid.UUID | None = None


class WebhookCreated(WebhookPublic):
    """The one answer that shows the signing secret (stored encrypted, never shown again)."""

    model_config = ConfigDict(hide_input_in_errors=True)
    secret: str = Field(repr=False)


class WebhooksPublic(BaseModel):
    data: list[WebhookPublic]


class AttemptPublic(Public):
    at: UtcDatetime
    status_code: int | None
    error: str | None
    duration_ms: int


class DeliveryPublic(BaseModel):
    """One event sent to one webhook: `id` is its `X-Archsearch-Delivery` header."""

    id: uuid.UUID
    event: str
    subject: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: UtcDatetime
    next_attempt_at: UtcDatetime
    delivered_at: UtcDatetime | None
    attempt_log: list[AttemptPublic]


class DeliveriesPublic(BaseModel):
    data: list[DeliveryPublic]
