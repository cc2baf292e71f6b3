"""Webhook use cases: subscribe (with the target checked and the secret sealed), list,
delete, send a test ping, read a webhook's delivery log (a team's own; an admin's, every
team's), and re-seal every secret under the newest key. Each change commits once."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.webhooks import deliverer, events, repository
from archsearch.jobs.domain.webhooks.tables import Webhook
from archsearch.jobs.platform import outbound
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.secret_keys import SecretBox, secret_box
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.webhooks import (
    AttemptPublic,
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
    WebhookPublic,
)


def create_webhook(
    session: Session, settings: Settings, principal: Principal, request: WebhookCreate
) -> WebhookCreated:
    """Subscribe; the secret is stored sealed and this answer is the one place it is shown.
    Without a key (team mode, `ARCHSEARCH_SECRET_KEYS` unset) nothing is stored: 503."""
    principal.require("submit")
    outbound.check_target(request.url, outbound.TargetPolicy.of(settings))
    box = secret_box(settings)
    secret = request.secret or secrets.token_hex(32)
    webhook = Webhook(
        id=uuid.uuid4(),
        team_key=repository.team_key(principal.team_id),
        team_id=principal.team_id,
        url=request.url,
        events=list(dict.fromkeys(request.events)),
        secret=None,
        secret_encrypted=box.seal(secret),
        body_format=request.format,
        active=True,
        created_by=principal.name,
        created_at=utcnow(),
    )
    repository.add_webhook(session, webhook)
    session.commit()
    shown = WebhookPublic.model_validate(webhook).model_dump()
    return WebhookCreated.model_validate({**shown, "secret": secret})


def visible_webhook(session: Session, principal: Principal, webhook_id: uuid.UUID) -> Webhook:
    """The caller's team's webhook, or for an admin any team's (as jobs are); another
    team's answers 404, like a missing one."""
    if principal.is_admin:
        return repository.any_webhook(session, webhook_id)
    return repository.get_webhook(session, principal.team_id, webhook_id)


def visible_webhooks(session: Session, principal: Principal) -> list[Webhook]:
    """The caller's team's webhooks; an admin's list holds every team's."""
    if principal.is_admin:
        return repository.every_webhook(session)
    return repository.list_webhooks(session, principal.team_id)


def delete_webhook(session: Session, principal: Principal, webhook_id: uuid.UUID) -> None:
    principal.require("submit")
    repository.delete_webhook(session, visible_webhook(session, principal, webhook_id))
    session.commit()


def send_test(
    sessions: sessionmaker[Session], settings: Settings, principal: Principal, webhook_id: uuid.UUID
) -> DeliveryPublic:
    """A `ping` to this webhook alone, through the outbox, tried at once (and retried like
    any delivery if the receiver is not answering)."""
    principal.require("submit")
    with transaction(sessions) as session:
        webhook = visible_webhook(session, principal, webhook_id)
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
    visible_webhook(session, principal, webhook_id)
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


@dataclass(frozen=True)
class Resealed:
    """What `reseal_secrets` did: secrets re-sealed under the newest key, and clear ones
    (kept from before migration 0026) sealed for the first time."""

    resealed: int
    sealed_from_clear: int


def reseal_secrets(session: Session, box: SecretBox) -> Resealed:
    """Seal every webhook's signing secret under `box`'s newest key, emptying clear ones.
    All or nothing: a secret no key opens raises `WrongSecretKey` (naming the webhook) and
    the caller's transaction rolls back, so nothing is left half rotated."""
    resealed = from_clear = 0
    for webhook in repository.webhooks_to_reseal(session):
        if webhook.secret_encrypted is not None:
            what = f"webhook {webhook.id}'s secret"
            webhook.secret_encrypted = box.reseal(webhook.secret_encrypted, what)
            resealed += 1
        elif webhook.secret is not None:
            webhook.secret_encrypted, webhook.secret = box.seal(webhook.secret), None
            from_clear += 1
    session.flush()
    return Resealed(resealed, from_clear)
