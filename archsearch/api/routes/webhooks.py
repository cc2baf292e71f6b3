"""Webhooks: a team subscribes a URL to events (job outcomes, warnings, studies, model
versions and aliases), sends itself a test, and reads the delivery log.

Deliveries are signed (`X-Archsearch-Signature: sha256=<hex>` of the body under the
webhook's secret) and carry `X-Archsearch-Delivery` (the same on every retry) and
`X-Archsearch-Event`. Scoped to the caller's team: another team's webhook answers 404; an
admin token sees, tests and deletes every team's (and creates in its own team). The signing
secret is stored encrypted (`jobs/platform/secret_keys.py`) and shown once, on creation.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response, status

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import ReadSessionDep, ServicesDep, SessionDep, SettingsDep
from archsearch.api.errors import BODY_ERROR_RESPONSES
from archsearch.api.params import WebhookId
from archsearch.api.presenters import webhook_public, webhooks_public
from archsearch.jobs.domain.webhooks import service
from archsearch.schemas.webhooks import (
    DeliveriesPublic,
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
    WebhookPublic,
    WebhooksPublic,
)

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WebhookCreated,
    responses=BODY_ERROR_RESPONSES,
)
def create_webhook(
    request: Annotated[WebhookCreate, Body()],
    session: SessionDep,
    settings: SettingsDep,
    principal: CurrentUser,
    response: Response,
) -> WebhookCreated:
    """Subscribe; the answer is the one place the signing secret is shown."""
    created = service.create_webhook(session, settings, principal, request)
    response.headers["Location"] = f"/v1/webhooks/{created.id}"
    return created


@router.get("", response_model=WebhooksPublic)
async def list_webhooks(session: ReadSessionDep, principal: CurrentUser) -> WebhooksPublic:
    """The caller's team's webhooks; an admin's holds every team's (each with `team_id`)."""
    return webhooks_public(await session.run_sync(service.visible_webhooks, principal))


@router.get("/{webhook_id}", response_model=WebhookPublic)
async def read_webhook(
    webhook_id: WebhookId, session: ReadSessionDep, principal: CurrentUser
) -> WebhookPublic:
    found = await session.run_sync(service.visible_webhook, principal, webhook_id)
    return webhook_public(found)


@router.delete("/{webhook_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_webhook(webhook_id: WebhookId, session: SessionDep, principal: CurrentUser) -> None:
    service.delete_webhook(session, principal, webhook_id)


@router.post("/{webhook_id}/test", response_model=DeliveryPublic)
def test_webhook(
    webhook_id: WebhookId, services: ServicesDep, principal: CurrentUser
) -> DeliveryPublic:
    """Send a `ping` now; the answer is its delivery, with the receiver's status code."""
    return service.send_test(services.sessions, services.settings, principal, webhook_id)


@router.get("/{webhook_id}/deliveries", response_model=DeliveriesPublic)
async def list_deliveries(
    webhook_id: WebhookId,
    session: ReadSessionDep,
    principal: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> DeliveriesPublic:
    found = await session.run_sync(service.list_deliveries, principal, webhook_id, limit)
    return DeliveriesPublic(data=found)
