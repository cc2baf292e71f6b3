"""Sending the outbox: claim due deliveries, POST each signed, record what happened.

Every API process runs `deliver_forever` in a thread, and so does the one worker that holds
the sweeps' turn (`jobs/sweeper.py`): the other workers' senders stay idle, so the fleet
looks at the outbox once a poll interval whatever its size. Claims are leased rows
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
from archsearch.jobs.platform.secret_keys import SecretKeyProblem, secret_box
from archsearch.jobs.platform.settings import Settings

log = logging.getLogger(__name__)
# Claimed at once by one sender; small, so a killed sender's claims come back soon (its
# lease covers BATCH requests that all time out).
BATCH = 5
# A delivery that this process's keys cannot sign waits this long before it is looked at
# again: the fix (setting the right keys) takes an operator and a restart, not seconds.
KEY_PROBLEM_RETRY_SECONDS = 60


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


def headers_for(delivery: WebhookDelivery, event: str, body: bytes, secret: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-Archsearch-Event": event,
        "X-Archsearch-Delivery": str(delivery.id),
        "X-Archsearch-Signature": outbound.signature(secret, body),
    }


def signing_secret(webhook: Webhook, settings: Settings) -> str:
    """The webhook's secret in clear, for this one signature: opened from its sealed column,
    or a clear one kept from before secrets were sealed (migration 0026). Raises
    `SecretKeyProblem` when this process's keys cannot open it."""
    if webhook.secret_encrypted is not None:
        return secret_box(settings).open(webhook.secret_encrypted, f"webhook {webhook.id}'s secret")
    assert webhook.secret is not None, f"webhook {webhook.id} has no secret"
    return webhook.secret


def hold(sessions: sessionmaker[Session], delivery_id: uuid.UUID, problem: Exception) -> None:
    """A delivery this process cannot sign stays pending, no attempt spent, and is looked at
    again later (by a process with the right keys, or this one once they are fixed); the
    operator reads why in the log and in the delivery's `last_error`."""
    log.error("webhook delivery %s held: %s", delivery_id, problem)
    until = utcnow() + timedelta(seconds=KEY_PROBLEM_RETRY_SECONDS)
    with transaction(sessions) as session:
        repository.hold_delivery(session, delivery_id, f"held, not sent: {problem}", until)


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
        try:
            secret = signing_secret(webhook, settings)
        except SecretKeyProblem as problem:
            session.close()
            hold(sessions, delivery_id, problem)
            return None
        body = body_for(webhook, delivery, event, settings.webhook_max_body_bytes)
        headers = headers_for(delivery, event.name, body, secret)
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
    some events, a model's, change no job). An inactive sender sleeps without a query."""

    def __init__(self, active: bool = True) -> None:
        self._stopped = threading.Event()
        self._nudged = threading.Event()
        self._active = threading.Event()
        self.set_active(active)

    def set_active(self, active: bool) -> None:
        """A worker's sender sends only while its worker holds the sweeps' turn."""
        if active:
            self._active.set()
        else:
            self._active.clear()

    @property
    def active(self) -> bool:
        return self._active.is_set()

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
            if not handle.active:
                continue
            try:
                while deliver_due(sessions, settings, client) and not handle.stopped:
                    pass  # drain what is due before sleeping again
            except Exception:  # keep delivering through transient database trouble
                log.exception("webhook delivery pass failed")


def start_deliverer(
    sessions: sessionmaker[Session], settings: Settings, active: bool = True
) -> Deliverer:
    """Run `deliver_forever` in a daemon thread; its handle nudges, (de)activates and stops
    it."""
    handle = Deliverer(active)
    thread = threading.Thread(
        target=deliver_forever,
        args=(sessions, settings, handle),
        name="archsearch-webhooks",
        daemon=True,
    )
    thread.start()
    return handle
