"""The client's webhook methods, mixed into `ArchsearchClient`.

A webhook is named by its id or any unique start of it; a team has a handful, so a prefix
is resolved against the list (an admin's list holds every team's).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from archsearch.client.ids import resolve_id
from archsearch.schemas.webhooks import (
    BodyFormat,
    DeliveriesPublic,
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
    WebhookEventName,
    WebhookPublic,
    WebhooksPublic,
)

WebhookRef = str | uuid.UUID
Model = TypeVar("Model", bound=BaseModel)


class WebhooksMixin:
    """Needs the host class's `_send` and `_get` (see `ArchsearchClient`)."""

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def _get(self, model: type[Model], path: str, **kwargs: Any) -> Model:
        raise NotImplementedError

    def list_webhooks(self) -> list[WebhookPublic]:
        return self._get(WebhooksPublic, "/v1/webhooks").data

    def create_webhook(
        self,
        url: str,
        events: Sequence[WebhookEventName],
        secret: str | None = None,
        format: BodyFormat = "json",
    ) -> WebhookCreated:
        """Subscribe `url`; the answer holds the signing secret, the one time it is shown
        (made by the server when `secret` is None). Sent once, never retried."""
        request = WebhookCreate(url=url, events=list(events), secret=secret, format=format)
        body = request.model_dump(mode="json", exclude_none=True)
        response = self._send("POST", "/v1/webhooks", json=body)
        return WebhookCreated.model_validate_json(response.content)

    def get_webhook(self, webhook_id: WebhookRef) -> WebhookPublic:
        return self._get(WebhookPublic, f"/v1/webhooks/{self.resolve_webhook_id(webhook_id)}")

    def delete_webhook(self, webhook_id: WebhookRef) -> None:
        self._send("DELETE", f"/v1/webhooks/{self.resolve_webhook_id(webhook_id)}")

    def test_webhook(self, webhook_id: WebhookRef) -> DeliveryPublic:
        """Send a `ping` now; the answer is its delivery, with the receiver's status code."""
        path = f"/v1/webhooks/{self.resolve_webhook_id(webhook_id)}/test"
        return DeliveryPublic.model_validate_json(self._send("POST", path).content)

    def webhook_deliveries(self, webhook_id: WebhookRef, limit: int = 100) -> list[DeliveryPublic]:
        """The newest deliveries first, each with the log of its attempts."""
        path = f"/v1/webhooks/{self.resolve_webhook_id(webhook_id)}/deliveries"
        return self._get(DeliveriesPublic, path, params={"limit": limit}).data

    def resolve_webhook_id(self, id_or_prefix: WebhookRef) -> uuid.UUID:
        return resolve_id(id_or_prefix, "webhook", self._webhook_ids_starting)

    def _webhook_ids_starting(self, hex_digits: str) -> list[uuid.UUID]:
        return [w.id for w in self.list_webhooks() if w.id.hex.startswith(hex_digits)]
