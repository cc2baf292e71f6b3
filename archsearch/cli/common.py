"""What every client command shares: the server address, a client that turns the API's
refusals into one line, and how ids and times are shown."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import NoReturn

import click
from rich.console import Console
from rich.markup import escape

from archsearch.client import DEFAULT_URL, ArchsearchClient, ClientError
from archsearch.schemas.jobs import JobPublic

console = Console()
SHORT_ID = 8  # characters of a job id shown by `list`; more when two listed ids share them
# Exit codes of `wait` / `submit --wait`: 1 the job did not succeed (also any error); 2 is
# click's usage error; 3 it succeeded but carries a usefulness warning (a collapsed or
# chance-level model): a script must not ship that result unread.
EXIT_FAILED = 1
EXIT_WARNINGS = 3

url_option = click.option(
    "--url",
    envvar="ARCHSEARCH_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="server address (env ARCHSEARCH_URL)",
)


def fail(error: Exception | str) -> NoReturn:
    console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
    sys.exit(1)


@contextmanager
def client_for(url: str) -> Iterator[ArchsearchClient]:
    """A client of `url`; any error of the client ends the command with its one-line message
    (no server, an API refusal, an ambiguous id), never a traceback."""
    with ArchsearchClient(url, token=os.environ.get("ARCHSEARCH_TOKEN")) as client:
        try:
            yield client
        except ClientError as exc:
            fail(exc)


def local_time(moment: datetime) -> str:
    """A timestamp in the user's time zone, with its offset: never ambiguous."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def unique_prefixes(ids: list[str], shortest: int = SHORT_ID) -> dict[str, str]:
    """For each id, its shortest prefix (at least `shortest` characters) that no other of
    `ids` starts with, like git's abbreviated hashes."""
    prefixes = {}
    for job_id in ids:
        length = shortest
        while length < len(job_id) and any(
            other != job_id and other.startswith(job_id[:length]) for other in ids
        ):
            length += 1
        prefixes[job_id] = job_id[:length]
    return prefixes


def compact_count(value: float | None) -> str:
    """12_345 as `12.3k`, 2_500_000 as `2.5M`: a column of parameter counts stays narrow."""
    if value is None:
        return ""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.0f}"


def duration_text(job: JobPublic) -> str:
    """Time since the job was first claimed, to its end (or now): `42s`, `3m05s`, `1h02m`;
    it includes any time back in the queue after a requeue or preemption."""
    if job.started_at is None:
        return ""
    end = job.finished_at or datetime.now(UTC)
    seconds = int((end - job.started_at).total_seconds())
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
