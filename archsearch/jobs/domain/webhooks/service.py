"""Webhook use cases: subscribe (with the target checked), list, delete, send a test ping,
and read a webhook's delivery log. Each change commits once."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.webhooks import deliverer, events, repository
from archsearch.jobs.domain.webhooks.tables import Webhook
from archsearch.jobs.platform import outbound
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.webhooks import (
    AttemptPublic,
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
)


def create_webhook(
    session: Session, settings: Settings, principal: Principal, request: WebhookCreate
) -> WebhookCreated:
    principal.require("submit")
    outbound.check_target(request.url, outbound.TargetPolicy.of(settings))
    webhook = Webhook(
        id=uuid.uuid4(),
        team_key=repository.team_key(principal.team_id),
        team_id=principal.team_id,
        url=request.url,
        events=list(dict.fromkeys(request.events)),
        secret=request.secret or secrets.token_hex(32),
        body_format=request.format,
        active=True,
        created_by=principal.name,
        created_at=utcnow(),
    )
    repository.add_webhook(session, webhook)
    session.commit()
    return WebhookCreated.model_validate(webhook)


def delete_webhook(session: Session, principal: Principal, webhook_id: uuid.UUID) -> None:
    principal.require("submit")
    repository.delete_webhook(
        session, repository.get_webhook(session, principal.team_id, webhook_id)
    )
    session.commit()


def send_test(
    sessions: sessionmaker[Session], settings: Settings, principal: Principal, webhook_id: uuid.UUID
) -> DeliveryPublic:
    """A `ping` to this webhook alone, through the outbox, tried at once (and retried like
    any delivery if the receiver is not answering)."""
    principal.require("submit")
    with transaction(sessions) as session:
        webhook = repository.get_webhook(session, principal.team_id, webhook_id)
        payload = {
            "event": events.PING,
            "occurred_at": utcnow().isoformat(),
            "actor": principal.name,
        }
        (delivery,) = repository.add_event(
            session, events.PING, f"webhook:{webhook_id}", payload, [webhook]
        )
        # Held by this request while it sends, so no deliverer loop sends it at once too.
        lease = timedelta(seconds=settings.webhook_timeout_seconds + 10)
        delivery.next_attempt_at = utcnow() + lease
        delivery_id = delivery.id
    with outbound.new_client(settings) as client:
        deliverer.deliver_one(sessions, settings, client, delivery_id)
    with sessions() as session:
        return list_deliveries(session, principal, webhook_id, 1, delivery_id)[0]


def list_deliveries(
    session: Session,
    principal: Principal,
    webhook_id: uuid.UUID,
    limit: int,
    delivery_id: uuid.UUID | None = None,
) -> list[DeliveryPublic]:
    """Newest first, each with its attempts (status code or error of every try)."""
    repository.get_webhook(session, principal.team_id, webhook_id)
    found = repository.deliveries_of(session, webhook_id, limit, delivery_id)
    attempts = repository.attempts_of(session, [d.id for d, _ in found])
    return [
        DeliveryPublic(
            id=d.id,
            event=e.name,
            subject=d.subject,
            status=d.status,
            attempts=d.attempts,
            last_status_code=d.last_status_code,
            last_error=d.last_error,
            created_at=d.created_at,
            next_attempt_at=d.next_attempt_at,
            delivered_at=d.delivered_at,
            attempt_log=[AttemptPublic.model_validate(a) for a in attempts.get(d.id, [])],
        )
        for d, e in found
    ]
