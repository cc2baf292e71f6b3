"""`archsearch admin ...`: bootstrap teams, users and tokens, straight against the database.

There is no default user, password or token: the first admin is made here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts import repository
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.domain.accounts.service import revoke_token as revoke
from archsearch.jobs.domain.accounts.tokens import TOKEN_SCOPES
from archsearch.jobs.domain.errors import Forbidden, NotFound
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.domain.webhooks import service as webhook_service
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.secret_keys import SecretKeyProblem, new_key, secret_box
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings

console = Console()
T = TypeVar("T")


def _run(action: Callable[[Session], T]) -> T:
    """Run `action` in one transaction; a refusal ends the command with its message."""
    try:
        with transaction(Services.from_settings(Settings()).sessions) as session:
            return action(session)
    except (NotFound, Forbidden, ValueError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
    except IntegrityError:
        console.print("[red]error:[/red] that name is taken")
    sys.exit(1)


@click.group()
def admin() -> None:
    """Teams, users and API tokens (team mode)."""


@admin.command("create-team")
@click.argument("name")
@click.option("--max-running", type=int, default=None, help="jobs of the team running at once")
def create_team(name: str, max_running: int | None) -> None:
    _run(lambda s: repository.create_team(s, name, max_running))
    console.print(f"team {name} created")


@admin.command("set-team-quota")
@click.argument("name")
@click.option(
    "--weekly-device-hours",
    required=True,
    help="device-hours the team's jobs may use per rolling 7 days; 'none' removes the limit",
)
def set_team_quota(name: str, weekly_device_hours: str) -> None:
    """Limit a team's device time; its queued jobs wait while the last 7 days used it up."""
    hours = None if weekly_device_hours.lower() == "none" else _hours(weekly_device_hours)
    reason = _run(lambda s: _set_weekly_quota(s, name, hours))
    console.print(f"team {name}: {'held, ' + reason if reason else 'not held'}")


def _hours(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter(f"a number of hours or 'none', not {value!r}") from None


def _set_weekly_quota(session: Session, name: str, hours: float | None) -> str | None:
    team = repository.team_by_name(session, name)
    repository.set_weekly_device_hours(session, team, hours)
    quota.update_holds(session, team_ids={team.id})  # held or released now, not at a tick
    return team.usage_held_reason


@admin.command("create-user")
@click.argument("name")
@click.option("--team", required=True)
@click.option("--admin", "is_admin", is_flag=True, help="may see every team and set any priority")
@click.option("--max-running", type=int, default=None, help="jobs of this user running at once")
def create_user(name: str, team: str, is_admin: bool, max_running: int | None) -> None:
    _run(
        lambda s: repository.create_user(
            s, repository.team_by_name(s, team), name, is_admin, max_running
        )
    )
    console.print(f"user {name} created in team {team}")


@admin.command("create-token")
@click.argument("user")
@click.option(
    "--scope",
    type=click.Choice(TOKEN_SCOPES),
    default="submit",
    show_default=True,
    help="read, submit, admin (an admin user's), or metrics (GET /metrics only, for Prometheus)",
)
@click.option("--expires-days", type=float, default=90, show_default=True, help="0: never")
def create_token(user: str, scope: str, expires_days: float) -> None:
    """Print a new token. It is shown once and stored only as a hash."""
    click.echo(_run(lambda s: issue_token(s, user, scope, expires_days or None)))


@admin.command("bootstrap")
@click.option("--team", default="admins", show_default=True)
@click.option("--user", default="admin", show_default=True)
@click.option("--expires-days", type=float, default=90, show_default=True, help="0: never")
def bootstrap(team: str, user: str, expires_days: float) -> None:
    """Create the first team, admin user and admin token, and print the token.

    Once an admin USER exists this prints nothing and succeeds, so a one-shot service can run
    it at every start without minting a new token each time."""
    token = _run(lambda s: _bootstrap(s, team, user, expires_days or None))
    if token is None:
        console.print(f"user {user} exists already; no new token (see create-token)")
    else:
        click.echo(token)


def _bootstrap(session: Session, team: str, user: str, expires_days: float | None) -> str | None:
    try:
        repository.user_by_name(session, user)
        return None
    except NotFound:
        pass
    try:
        first_team = repository.team_by_name(session, team)
    except NotFound:
        first_team = repository.create_team(session, team, None)
    repository.create_user(session, first_team, user, True, None)
    return issue_token(session, user, "admin", expires_days)


@admin.command("revoke-token")
@click.argument("prefix")
def revoke_token(prefix: str) -> None:
    """Revoke the token whose first 12 characters are PREFIX."""
    _run(lambda s: revoke(s, prefix))
    console.print(f"token {prefix}… revoked")


@admin.command("list-tokens")
@click.argument("user")
def list_tokens(user: str) -> None:
    tokens = _run(lambda s: repository.tokens_of(s, repository.user_by_name(s, user)))
    table = Table("prefix", "scope", "expires", "revoked", "created")
    for t in tokens:
        table.add_row(
            t.prefix,
            t.scope,
            str(t.expires_at or "never"),
            str(t.revoked_at or ""),
            str(t.created_at),
        )
    console.print(table)


@admin.command("new-secret-key")
def new_secret_key() -> None:
    """Print a new key for ARCHSEARCH_SECRET_KEYS (docs/secrets.md)."""
    click.echo(new_key())


@admin.command("rotate-webhook-secrets")
def rotate_webhook_secrets() -> None:
    """Re-encrypt every webhook signing secret under the newest (first) key of
    ARCHSEARCH_SECRET_KEYS, and encrypt those kept in clear from before this version.

    Put a new key first, restart the processes, run this; then the old keys may go. All or
    nothing: a secret that no listed key opens is named and nothing is changed."""
    settings = Settings()
    try:
        box = secret_box(settings, make_key_file=False)
        with transaction(Services.from_settings(settings).sessions) as session:
            done = webhook_service.reseal_secrets(session, box)
    except SecretKeyProblem as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        sys.exit(1)
    console.print(
        f"{done.resealed + done.sealed_from_clear} webhook secrets encrypted under the newest "
        f"key of {box.source} ({done.sealed_from_clear} of them were stored in clear)",
        highlight=False,
    )
