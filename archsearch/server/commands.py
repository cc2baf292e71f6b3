"""The server's `archsearch` commands: serve, api, worker (and its liveness probe, `worker
alive`), db, and admin.

The light CLI (`archsearch.cli.main`) loads this module by name when one of these commands
is asked for, so `pip install archsearch` without the `server` extra never needs it.
Settings are built here, once per command, and handed on as arguments.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console

from archsearch.jobs.platform.settings import Settings
from archsearch.server import alive, processes
from archsearch.server.admin import admin

console = Console()


def settings_with(**overrides: Any) -> Settings:
    """The environment's settings; command-line options that were given win. An invalid
    setting stops the command with one line per problem, naming the variable."""
    try:
        return Settings(**{name: value for name, value in overrides.items() if value is not None})
    except ValidationError as exc:
        problems = [
            f"ARCHSEARCH_{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
        ]
        processes.exit_with("invalid configuration:\n  " + "\n  ".join(problems))


@click.command()
@click.option("--host", default=None, help="default 127.0.0.1 (ARCHSEARCH_HOST)")
@click.option("--port", default=None, type=int, help="default 8000 (ARCHSEARCH_PORT)")
def serve(host: str | None, port: int | None) -> None:
    """Run everything on this machine: API + local job runner, SQLite by default."""
    processes.serve_embedded(settings_with(host=host, port=port))


@click.command()
@click.option("--host", default=None)
@click.option("--port", default=None, type=int)
def api(host: str | None, port: int | None) -> None:
    """Run the API of a team deployment (ARCHSEARCH_DATABASE_URL and ..._BROKER_URL set)."""
    processes.serve_team_api(settings_with(host=host, port=port))


@click.command("alive")
@click.option(
    "--max-age",
    type=click.FloatRange(min=0),
    default=180.0,
    show_default=True,
    help="seconds since the last heartbeat beyond which the worker counts as stalled",
)
def worker_alive(max_age: float) -> None:
    """Exit 0 when a worker process of this machine touched its alive file
    (ARCHSEARCH_WORKER_ALIVE_FILE) within --max-age seconds, 1 otherwise: the liveness
    probe of the worker pods. Reads one file: no database, no torch. The pods run the same
    check lighter, without the CLI: `python -m archsearch.server.alive`."""
    ok, line = alive.verdict(settings_with().resolved_worker_alive_file, max_age)
    console.print(line, highlight=False)
    if not ok:
        sys.exit(1)


class WorkerCommand(click.Command):
    """`archsearch worker` hands the arguments it does not know to Celery, so its one
    subcommand, `alive`, is recognised by name before those arguments are parsed."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        if args[:1] == ["alive"]:
            return worker_alive.make_context(f"{info_name} alive", args[1:], parent, **extra)
        return super().make_context(info_name, args, parent, **extra)


@click.command(cls=WorkerCommand, context_settings={"ignore_unknown_options": True})
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="auto: one process per visible GPU, or one CPU process when there is none",
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(device: str, celery_args: tuple[str, ...]) -> None:
    """Run job workers, ARCHSEARCH_WORKER_SLOTS jobs per device at a time (default 1; extra
    arguments go to celery).

    `archsearch worker alive [--max-age SECONDS]` is their liveness probe."""
    settings = settings_with()
    # A heartbeat left by the previous worker of this scratch folder (a restarted container
    # keeps its emptyDir) must not vouch for this one before its first heartbeat.
    with contextlib.suppress(OSError):  # none there, or a folder this user cannot write
        settings.resolved_worker_alive_file.unlink(missing_ok=True)
    processes.run_worker(settings, device, list(celery_args))


@click.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply all migrations to ARCHSEARCH_DATABASE_URL (or the embedded SQLite file)."""
    processes.quiet_logging()
    console.print(f"database at revision {processes.upgrade_database(Settings())}")


@db.command("current")
def db_current() -> None:
    """Print the database's revision and the code's; exit 1 when they differ."""
    current, head = processes.database_revisions(Settings())
    console.print(f"current: {current or '(empty)'}  head: {head}")
    sys.exit(0 if current == head else 1)


COMMANDS: dict[str, click.Command] = {
    "serve": serve,
    "api": api,
    "worker": worker,
    "db": db,
    "admin": admin,
}
