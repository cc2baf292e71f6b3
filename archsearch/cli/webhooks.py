"""`archsearch webhooks ...`: the team's webhooks from the command line (an admin's token
sees every team's). Each command that prints an answer takes `--json`: the API's own
answer, for scripts.

archsearch webhooks list
archsearch webhooks create URL --event job.failed [--event ...] [--format slack]
                               [--secret-file FILE|-]   (prints the signing secret, once)
archsearch webhooks show ID          (the webhook and its latest deliveries)
archsearch webhooks test ID          (sends a ping now)
archsearch webhooks deliveries ID [--limit N]
archsearch webhooks delete ID

ID is a webhook id or any unique start of it.
"""

from __future__ import annotations

import sys
from typing import IO, cast, get_args

import click
from pydantic import BaseModel
from rich.table import Table

from archsearch.cli.common import EXIT_FAILED, client_for, console, fail, local_time, url_option
from archsearch.schemas.webhooks import (
    BodyFormat,
    DeliveriesPublic,
    DeliveryPublic,
    WebhookCreated,
    WebhookEventName,
    WebhookPublic,
    WebhooksPublic,
)

SHOWN_DELIVERIES = 10
json_option = click.option(
    "--json", "as_json", is_flag=True, help="print the API's JSON answer instead of a table"
)


def print_json(answer: BaseModel) -> None:
    click.echo(answer.model_dump_json(indent=2))


@click.group()
def webhooks() -> None:
    """URLs told about job outcomes, studies and model versions (signed POSTs)."""


@webhooks.command("list")
@json_option
@url_option
def list_webhooks(as_json: bool, url: str) -> None:
    """The team's webhooks (an admin's token: every team's)."""
    with client_for(url) as client:
        found = client.list_webhooks()
    if as_json:
        print_json(WebhooksPublic(data=found))
        return
    table = Table("id", "url", "events", "format", "by", "created")
    for hook in found:
        table.add_row(*_row(hook))
    console.print(table)


def _row(hook: WebhookPublic) -> list[str]:
    events = ", ".join(hook.events)
    created = local_time(hook.created_at)
    return [str(hook.id)[:8], hook.url, events, hook.format, hook.created_by, created]


@webhooks.command("create")
@click.argument("target_url")
@click.option(
    "--event",
    "events",
    multiple=True,
    required=True,
    type=click.Choice(get_args(WebhookEventName)),
    help="an event to send (repeatable)",
)
@click.option("--format", "body_format", type=click.Choice(get_args(BodyFormat)), default="json")
@click.option(
    "--secret-file",
    type=click.File("r"),
    default=None,
    help="read the signing secret from FILE ('-': standard input) instead of letting the "
    "server make one; never on the command line, where other users' `ps` would see it",
)
@json_option
@url_option
def create(
    target_url: str,
    events: tuple[str, ...],
    body_format: str,
    secret_file: IO[str] | None,
    as_json: bool,
    url: str,
) -> None:
    """Subscribe TARGET_URL; prints the webhook's id and its signing secret, which is
    stored encrypted and never shown again: keep it where the receiver can check with it."""
    secret = secret_file.read().strip() if secret_file is not None else None
    # click's choices checked both against the schema's own literals.
    names = cast(list[WebhookEventName], list(events))
    with client_for(url) as client:
        created = client.create_webhook(target_url, names, secret, cast(BodyFormat, body_format))
    if as_json:
        print_json(created)
        return
    _print_created(created)


def _print_created(created: WebhookCreated) -> None:
    console.print(f"webhook {created.id}", highlight=False)
    console.print(f"signing secret (shown this once): {created.secret}", highlight=False)


@webhooks.command("show")
@click.argument("webhook_id")
@json_option
@url_option
def show(webhook_id: str, as_json: bool, url: str) -> None:
    """A webhook (never its secret) and its latest deliveries."""
    with client_for(url) as client:
        hook = client.get_webhook(webhook_id)
        deliveries = client.webhook_deliveries(hook.id, SHOWN_DELIVERIES)
    if as_json:
        print_json(hook)
        return
    console.print(f"webhook {hook.id} -> {hook.url}", highlight=False)
    console.print(f"events: {', '.join(hook.events)}; format {hook.format}", highlight=False)
    console.print(f"created by {hook.created_by} at {local_time(hook.created_at)}", highlight=False)
    console.print(_deliveries_table(deliveries))


@webhooks.command("deliveries")
@click.argument("webhook_id")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@json_option
@url_option
def deliveries(webhook_id: str, limit: int, as_json: bool, url: str) -> None:
    """A webhook's deliveries, newest first, with the outcome of the last try."""
    with client_for(url) as client:
        found = client.webhook_deliveries(webhook_id, limit)
    if as_json:
        print_json(DeliveriesPublic(data=found))
        return
    console.print(_deliveries_table(found))


def _deliveries_table(found: list[DeliveryPublic]) -> Table:
    table = Table("delivery", "event", "subject", "status", "tries", "last answer", "created")
    for d in found:
        answer = d.last_error or (str(d.last_status_code) if d.last_status_code else "-")
        table.add_row(
            str(d.id)[:8],
            d.event,
            d.subject,
            d.status,
            str(d.attempts),
            answer,
            local_time(d.created_at),
        )
    return table


@webhooks.command("test")
@click.argument("webhook_id")
@json_option
@url_option
def test(webhook_id: str, as_json: bool, url: str) -> None:
    """Send a `ping` now and print what the receiver answered; exits 1 unless it was
    delivered (the delivery stays in the log and is retried like any other)."""
    with client_for(url) as client:
        delivery = client.test_webhook(webhook_id)
    if as_json:
        print_json(delivery)
    else:
        console.print(_deliveries_table([delivery]))
    if delivery.status != "delivered":
        if as_json:
            sys.exit(EXIT_FAILED)  # standard output holds the JSON alone
        fail(f"the ping was not delivered: {delivery.last_error or delivery.last_status_code}")


@webhooks.command("delete")
@click.argument("webhook_id")
@url_option
def delete(webhook_id: str, url: str) -> None:
    """Unsubscribe: the webhook and its delivery log are removed."""
    with client_for(url) as client:
        webhook = client.resolve_webhook_id(webhook_id)
        client.delete_webhook(webhook)
    console.print(f"webhook {webhook} deleted", highlight=False)
