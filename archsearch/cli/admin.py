"""`archsearch admin ...`: bootstrap teams, users and tokens, straight against the database.

There is no default user, password or token: the first admin is made here.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

console = Console()


def _transaction():  # type: ignore[no-untyped-def]
    from archsearch.jobs.platform.db import transaction
    from archsearch.jobs.platform.services import Services
    from archsearch.jobs.platform.settings import Settings

    return transaction(Services.from_settings(Settings()).sessions)


def _run(action):  # type: ignore[no-untyped-def]
    from sqlalchemy.exc import IntegrityError

    from archsearch.jobs.domain.accounts.service import Forbidden
    from archsearch.jobs.domain.errors import NotFound

    try:
        with _transaction() as session:
            return action(session)
    except (NotFound, Forbidden, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
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
    from archsearch.jobs.domain.accounts import repository

    _run(lambda s: repository.create_team(s, name, max_running))
    console.print(f"team {name} created")


@admin.command("create-user")
@click.argument("name")
@click.option("--team", required=True)
@click.option("--admin", "is_admin", is_flag=True, help="may see every team and set any priority")
@click.option("--max-running", type=int, default=None, help="jobs of this user running at once")
def create_user(name: str, team: str, is_admin: bool, max_running: int | None) -> None:
    from archsearch.jobs.domain.accounts import repository

    _run(
        lambda s: repository.create_user(
            s, repository.team_by_name(s, team), name, is_admin, max_running
        )
    )
    console.print(f"user {name} created in team {team}")


@admin.command("create-token")
@click.argument("user")
@click.option(
    "--scope", type=click.Choice(["read", "submit", "admin"]), default="submit", show_default=True
)
@click.option("--expires-days", type=float, default=90, show_default=True, help="0: never")
def create_token(user: str, scope: str, expires_days: float) -> None:
    """Print a new token. It is shown once and stored only as a hash."""
    from archsearch.jobs.domain.accounts.service import issue_token

    token = _run(lambda s: issue_token(s, user, scope, expires_days or None))
    click.echo(token)


@admin.command("revoke-token")
@click.argument("prefix")
def revoke_token(prefix: str) -> None:
    """Revoke the token whose first 12 characters are PREFIX."""
    from archsearch.jobs.domain.accounts.service import revoke_token as revoke

    _run(lambda s: revoke(s, prefix))
    console.print(f"token {prefix}… revoked")


@admin.command("list-tokens")
@click.argument("user")
def list_tokens(user: str) -> None:
    from archsearch.jobs.domain.accounts import repository

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
