"""Sending the outbox: claim due deliveries, POST each signed, record what happened.

Every API and worker process runs `deliver_forever` in a thread; claims are leased rows
(`repository.claim_due`), so processes share the work without sending one delivery twice
at once, and a process killed mid-request leaves its claim to expire and be retried with
the same delivery id. Only the first pending delivery of a subject (a job, a model) is due,
so a receiver sees one job's events in order. A failure waits 1, 2, 4, ... seconds (at most
`webhook_backoff_max_seconds`) and is retried for `webhook_retry_hours`.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from datetime import datetime, timedelta

import httpx
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.webhooks import repository
from archsearch.jobs.domain.webhooks.tables import Webhook, WebhookDelivery, WebhookEvent
from archsearch.jobs.platform import outbound
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.settings import Settings

log = logging.getLogger(__name__)
# Claimed at once by one sender; small, so a killed sender's claims come back soon (its
# lease covers BATCH requests that all time out).
BATCH = 5


def body_for(webhook: Webhook, delivery: WebhookDelivery, event: WebhookEvent, limit: int) -> bytes:
    payload = {**event.payload, "delivery_id": str(delivery.id)}
    if webhook.body_format == "slack":
        payload = {"text": slack_text(event)}
    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    if len(body) > limit:  # the receiver still learns what happened, and can ask the API
        cut = {"event": event.name, "subject": event.subject, "truncated": True}
        body = json.dumps({**cut, "delivery_id": str(delivery.id)}).encode()
    return body


def slack_text(event: WebhookEvent) -> str:
    """One line a Slack-compatible incoming webhook shows as the message."""
    data = event.payload
    if "job" in data:
        job = data["job"]
        line = f"archsearch: job {job['id'][:8]} ({job['method']}) {event.name.split('.')[1]}"
        return line + (f": {job['error']}" if job.get("error") else "")
    if "study" in data:
        return f"archsearch: study {data['study']['name']} {data['study']['status']}"
    if "model" in data:
        return f"archsearch: {event.name} for model {data['model']}"
    return f"archsearch: {event.name}"


def headers_for(
    webhook: Webhook, delivery: WebhookDelivery, event: str, body: bytes
) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-Archsearch-Event": event,
        "X-Archsearch-Delivery": str(delivery.id),
        "X-Archsearch-Signature": outbound.signature(webhook.secret, body),
    }


def next_try(settings: Settings, created_at: datetime, attempts: int) -> datetime | None:
    """When to try again after `attempts` failures; None once the retry window is over."""
    now = utcnow()
    if now - as_utc(created_at) > timedelta(hours=settings.webhook_retry_hours):
        return None
    wait = min(settings.webhook_backoff_max_seconds, 2.0 ** max(0, attempts - 1))
    return now + timedelta(seconds=wait)


def deliver_one(
    sessions: sessionmaker[Session],
    settings: Settings,
    client: httpx.Client,
    delivery_id: uuid.UUID,
) -> outbound.Outcome | None:
    with sessions() as session:
        parts = repository.delivery_parts(session, delivery_id)
        if parts is None:
            return None  # its webhook was deleted meanwhile
        delivery, webhook, event = parts
        body = body_for(webhook, delivery, event, settings.webhook_max_body_bytes)
        headers = headers_for(webhook, delivery, event.name, body)
        url, attempts, created = webhook.url, delivery.attempts, delivery.created_at
    outcome = outbound.post(client, url, body, headers, outbound.TargetPolicy.of(settings))
    retry_at = None if outcome.ok else next_try(settings, created, attempts + 1)
    with transaction(sessions) as session:
        repository.record_attempt(
            session, delivery_id, outcome.status_code, outcome.error, outcome.duration_ms, retry_at
        )
    return outcome


def deliver_due(sessions: sessionmaker[Session], settings: Settings, client: httpx.Client) -> int:
    """Send what is due now (up to `BATCH`); returns how many were tried."""
    lease = timedelta(seconds=(settings.webhook_timeout_seconds + 1) * BATCH + 5)
    with transaction(sessions) as session:
        claimed = repository.claim_due(session, BATCH, lease)
    for delivery_id in claimed:
        deliver_one(sessions, settings, client, delivery_id)
    return len(claimed)


class Deliverer:
    """The sending thread's handle: `nudge()` when a delivery may be due (the API's job feed
    does, on every job change, so a job's event goes out at once), `stop()` at shutdown.
    Without nudges it still looks every `webhook_poll_seconds` (workers have no feed, and
    some events, a model's, change no job)."""

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._nudged = threading.Event()

    def nudge(self) -> None:
        self._nudged.set()

    def stop(self) -> None:
        self._stopped.set()
        self._nudged.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep until nudged or `seconds` passed; False once stopped."""
        self._nudged.wait(seconds)
        self._nudged.clear()
        return not self.stopped


def deliver_forever(sessions: sessionmaker[Session], settings: Settings, handle: Deliverer) -> None:
    with outbound.new_client(settings) as client:
        while handle.wait(settings.webhook_poll_seconds):
            try:
                while deliver_due(sessions, settings, client) and not handle.stopped:
                    pass  # drain what is due before sleeping again
            except Exception:  # keep delivering through transient database trouble
                log.exception("webhook delivery pass failed")


def start_deliverer(sessions: sessionmaker[Session], settings: Settings) -> Deliverer:
    """Run `deliver_forever` in a daemon thread; its handle nudges and stops it."""
    handle = Deliverer()
    thread = threading.Thread(
        target=deliver_forever,
        args=(sessions, settings, handle),
        name="archsearch-webhooks",
        daemon=True,
    )
    thread.start()
    return handle
