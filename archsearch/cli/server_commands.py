"""The server's commands inside the one `archsearch` command.

They live in `archsearch.server.commands`, which needs the `server` extra (torch, FastAPI,
SQLAlchemy, Celery). The light CLI never imports it: it loads that module by name when one
of its commands is asked for, and without the extra answers with the one line to run.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from archsearch.cli.common import fail

SERVER_MODULE = "archsearch.server.commands"
# name -> the one-line help shown by `archsearch --help` without loading the server.
SERVER_COMMANDS = {
    "serve": "Run everything on this machine: API + local job runner.",
    "api": "Run the API of a team deployment.",
    "worker": "Run job workers, ARCHSEARCH_WORKER_SLOTS jobs per device at a time.",
    "db": "Database schema: upgrade, current.",
    "admin": "Teams, users and API tokens (team mode).",
}


def load_server_commands() -> dict[str, click.Command] | None:
    """The server's commands by name, or None when the `server` extra is not installed."""
    try:
        module: Any = importlib.import_module(SERVER_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.partition(".")[0] == "archsearch":
            raise  # a module of ours is missing: a bug, not a missing extra
        return None
    commands: dict[str, click.Command] = module.COMMANDS
    return commands


def needs_server_extra(name: str) -> click.Command:
    """Stands in for a server command when the server is not installed."""

    @click.command(
        name,
        help=SERVER_COMMANDS[name],
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
    def stand_in() -> None:
        fail(
            f"`archsearch {name}` needs the server, which is not installed here: "
            "pip install 'archsearch[server]'"
        )

    return stand_in


class WithServerCommands(click.Group):
    """A group whose server commands are resolved by name only when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *SERVER_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in SERVER_COMMANDS:
            return super().get_command(ctx, cmd_name)
        commands = load_server_commands()
        return commands[cmd_name] if commands else needs_server_extra(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing the commands must not load the server: its help lines are known here.
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 20)))
            elif name in SERVER_COMMANDS:
                rows.append((name, SERVER_COMMANDS[name]))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
