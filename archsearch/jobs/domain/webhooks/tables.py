"""The webhook tables: subscriptions, the outbox of events, and one delivery per event and
subscription with its attempts.

An event and its deliveries are written in the transaction of the change they report (a
job's outcome, a model version), so a committed change always has its deliveries and a
rolled-back one never does. A delivery's id is the `X-Archsearch-Delivery` header, the same
on every retry, so a receiver can drop a repeat.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from archsearch.jobs.domain.base import Base, BigId, Timestamp, utcnow


class Webhook(Base):
    __tablename__ = "webhooks"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    # The team's hex id, or "" in embedded mode (as `registered_models.team_key`).
    team_key: Mapped[str] = mapped_column(String(32), index=True)
    team_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(JSON)
    # Every delivery is signed with the secret (HMAC), so it cannot be a hash: it is kept
    # sealed under the server's keys (`jobs/platform/secret_keys.py`). `secret` is the clear
    # column of rows made before 0026, emptied by `archsearch admin rotate-webhook-secrets`.
    secret: Mapped[str | None] = mapped_column(String(200))
    secret_encrypted: Mapped[str | None] = mapped_column(Text)
    body_format: Mapped[str] = mapped_column(String(16), default="json")  # json | slack
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class WebhookEvent(Base):
    """One change worth telling: its name, what it is about, and the body sent for it."""

    __tablename__ = "webhook_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64))
    # "job:<id>", "model:<name>", "study:<id>": deliveries of one subject go out in order.
    subject: Mapped[str] = mapped_column(String(200))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class WebhookDelivery(Base):
    __tablename__ = "webhook_deliveries"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    webhook_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_events.id", ondelete="CASCADE"), index=True
    )
    subject: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending|delivered|failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # When it may be tried next; while one sender holds it, the end of that sender's lease.
    next_attempt_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(Timestamp)

    __table_args__ = (
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        # "Is an earlier delivery of this subject still pending?": the in-order check.
        Index("ix_webhook_deliveries_order", "webhook_id", "subject", "event_id"),
    )


class WebhookAttempt(Base):
    """One try of a delivery: the status code answered, or the error met."""

    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    delivery_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), index=True
    )
    at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int] = mapped_column(Integer)
