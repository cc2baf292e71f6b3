"""A worker's webhook sender sends only while its worker holds the sweeps' turn: an inactive
sender leaves a due delivery untouched (no claim, no attempt), and sends it once activated,
so a fleet looks at the outbox through one worker, not every worker each poll."""

from __future__ import annotations

import time
import uuid

from pydantic import SecretStr

from archsearch.jobs.domain.accounts.service import LOCAL_USER
from archsearch.jobs.domain.webhooks import deliverer, repository, service
from archsearch.jobs.domain.webhooks.tables import WebhookDelivery
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.secret_keys import new_key
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.webhooks import WebhookCreate

TARGET = "http://127.0.0.1:9/hook"  # loopback is allowed embedded; nothing listens on 9
POLL_SECONDS = 0.05


def due_delivery(services: Services, settings: Settings) -> uuid.UUID:
    request = WebhookCreate(url=TARGET, events=["job.failed"])
    with services.sessions() as session:
        created = service.create_webhook(session, settings, LOCAL_USER, request)
    with transaction(services.sessions) as session:
        hook = repository.get_webhook(session, None, created.id)
        (delivery,) = repository.add_event(session, "ping", "webhook:x", {"event": "ping"}, [hook])
        return delivery.id


def attempts(services: Services, delivery_id: uuid.UUID) -> int:
    with services.sessions() as session:
        delivery = session.get(WebhookDelivery, delivery_id)
        assert delivery is not None
        return delivery.attempts


def test_an_inactive_sender_sends_nothing_until_its_worker_takes_the_turn(
    services: Services,
) -> None:
    settings = services.settings.model_copy(
        update={"secret_keys": SecretStr(new_key()), "webhook_poll_seconds": POLL_SECONDS}
    )
    delivery_id = due_delivery(services, settings)
    sender = deliverer.start_deliverer(services.sessions, settings, active=False)
    try:
        sender.nudge()
        time.sleep(20 * POLL_SECONDS)
        assert attempts(services, delivery_id) == 0
        sender.set_active(True)
        deadline = time.monotonic() + 10
        while attempts(services, delivery_id) == 0 and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        assert attempts(services, delivery_id) == 1  # refused by port 9: tried once, retried later
    finally:
        sender.stop()
