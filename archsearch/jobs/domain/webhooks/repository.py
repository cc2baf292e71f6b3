"""All SQL of webhooks and their outbox. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, select
from sqlalchemy.orm import Session, aliased

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.webhooks.tables import (
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
)

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


def team_key(team_id: uuid.UUID | None) -> str:
    return "" if team_id is None else team_id.hex


def add_webhook(session: Session, webhook: Webhook) -> Webhook:
    session.add(webhook)
    session.flush()
    return webhook


def list_webhooks(session: Session, team_id: uuid.UUID | None) -> list[Webhook]:
    query = select(Webhook).where(Webhook.team_key == team_key(team_id), Webhook.active)
    return list(session.scalars(query.order_by(Webhook.created_at)))


def every_webhook(session: Session) -> list[Webhook]:
    """Every team's webhooks: what an admin lists."""
    query = select(Webhook).where(Webhook.active)
    return list(session.scalars(query.order_by(Webhook.created_at)))


def webhooks_to_reseal(session: Session) -> list[Webhook]:
    """Every stored webhook, locked: a secret re-sealed here is not overwritten meanwhile."""
    query = select(Webhook).order_by(Webhook.created_at).with_for_update()
    return list(session.scalars(query))


def get_webhook(session: Session, team_id: uuid.UUID | None, webhook_id: uuid.UUID) -> Webhook:
    """The team's webhook; another team's answers as missing."""
    webhook = any_webhook(session, webhook_id)
    if webhook.team_key != team_key(team_id):
        raise NotFound(f"no webhook {webhook_id}")
    return webhook


def any_webhook(session: Session, webhook_id: uuid.UUID) -> Webhook:
    """A webhook of any team (what an admin may read)."""
    webhook = session.get(Webhook, webhook_id)
    if webhook is None or not webhook.active:
        raise NotFound(f"no webhook {webhook_id}")
    return webhook


def delete_webhook(session: Session, webhook: Webhook) -> None:
    session.delete(webhook)  # its deliveries and attempts go with it (ON DELETE CASCADE)
    session.flush()


def subscribers(session: Session, team_id: uuid.UUID | None, event: str) -> list[Webhook]:
    """The team's webhooks that asked for `event` (a team has a handful: filtered here)."""
    return [w for w in list_webhooks(session, team_id) if event in w.events]


def add_event(
    session: Session, name: str, subject: str, payload: dict[str, Any], hooks: Sequence[Webhook]
) -> list[WebhookDelivery]:
    """The event and one pending delivery per webhook, in the caller's transaction."""
    event = WebhookEvent(name=name, subject=subject, payload=payload, created_at=utcnow())
    session.add(event)
    session.flush()  # the id orders the subject's deliveries
    deliveries = [
        WebhookDelivery(
            id=uuid.uuid4(),
            webhook_id=hook.id,
            event_id=event.id,
            subject=subject,
            status=PENDING,
            attempts=0,
            next_attempt_at=event.created_at,
            created_at=event.created_at,
        )
        for hook in hooks
    ]
    session.add_all(deliveries)
    session.flush()
    return deliveries


def claim_due(session: Session, limit: int, lease: timedelta) -> list[uuid.UUID]:
    """Pending deliveries that are due and first of their subject, leased to the caller:
    another sender skips them (SKIP LOCKED), and sees them again only if the lease ends
    without a result (this sender died mid-request)."""
    now = utcnow()
    earlier = aliased(WebhookDelivery)
    blocked = exists().where(
        and_(
            earlier.webhook_id == WebhookDelivery.webhook_id,
            earlier.subject == WebhookDelivery.subject,
            earlier.status == PENDING,
            earlier.event_id < WebhookDelivery.event_id,
        )
    )
    query = (
        select(WebhookDelivery)
        .where(WebhookDelivery.status == PENDING, WebhookDelivery.next_attempt_at <= now, ~blocked)
        .order_by(WebhookDelivery.event_id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    claimed = list(session.scalars(query))
    for delivery in claimed:
        delivery.next_attempt_at = now + lease
    session.flush()
    return [d.id for d in claimed]


def delivery_parts(
    session: Session, delivery_id: uuid.UUID
) -> tuple[WebhookDelivery, Webhook, WebhookEvent] | None:
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None:
        return None
    webhook = session.get(Webhook, delivery.webhook_id)
    event = session.get(WebhookEvent, delivery.event_id)
    if webhook is None or event is None:
        return None
    return delivery, webhook, event


def record_attempt(
    session: Session,
    delivery_id: uuid.UUID,
    status_code: int | None,
    error: str | None,
    duration_ms: int,
    retry_at: datetime | None,
) -> WebhookDelivery | None:
    """Store one try's outcome: delivered on a 2xx; else pending until `retry_at`, or
    failed when `retry_at` is None (the retry window is over)."""
    delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
    if delivery is None:
        return None
    session.add(
        WebhookAttempt(
            delivery_id=delivery_id, status_code=status_code, error=error, duration_ms=duration_ms
        )
    )
    delivery.attempts += 1
    delivery.last_status_code, delivery.last_error = status_code, error
    if delivery.status != PENDING:
        return delivery  # another sender's attempt already settled it
    if error is None and status_code is not None and 200 <= status_code < 300:
        delivery.status, delivery.delivered_at = DELIVERED, utcnow()
    elif retry_at is None:
        delivery.status = FAILED
    else:
        delivery.next_attempt_at = retry_at
    session.flush()
    return delivery


def hold_delivery(
    session: Session, delivery_id: uuid.UUID, reason: str, until: datetime
) -> WebhookDelivery | None:
    """Keep a pending delivery for later without counting an attempt (it was never sent)."""
    delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
    if delivery is None or delivery.status != PENDING:
        return delivery
    delivery.last_error, delivery.next_attempt_at = reason, until
    session.flush()
    return delivery


def deliveries_of(
    session: Session, webhook_id: uuid.UUID, limit: int, delivery_id: uuid.UUID | None = None
) -> list[tuple[WebhookDelivery, WebhookEvent]]:
    query = (
        select(WebhookDelivery, WebhookEvent)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .where(WebhookDelivery.webhook_id == webhook_id)
        .order_by(WebhookDelivery.event_id.desc())
        .limit(limit)
    )
    if delivery_id is not None:
        query = query.where(WebhookDelivery.id == delivery_id)
    return [(d, e) for d, e in session.execute(query)]


def attempts_of(
    session: Session, delivery_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[WebhookAttempt]]:
    query = select(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(delivery_ids))
    found: dict[uuid.UUID, list[WebhookAttempt]] = {}
    for attempt in session.scalars(query.order_by(WebhookAttempt.id)):
        found.setdefault(attempt.delivery_id, []).append(attempt)
    return found
