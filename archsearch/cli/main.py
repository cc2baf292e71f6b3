"""The `archsearch` command: run the service (serve, api, worker, db) and talk to it
(submit, list, status, wait, cancel, download, datasets)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from archsearch.client import DEFAULT_URL, ApiError, ArchsearchClient

console = Console()


def resolve_url(url: str | None) -> str:
    return url or os.environ.get("ARCHSEARCH_URL", DEFAULT_URL)


url_option = click.option(
    "--url",
    default=lambda: os.environ.get("ARCHSEARCH_URL", DEFAULT_URL),
    show_default=DEFAULT_URL,
    help="server address (env ARCHSEARCH_URL)",
)


@click.group()
def main() -> None:
    """archsearch: search, prune and grow neural architectures as jobs."""


# ---- running the service -------------------------------------------------------------


@main.command()
@click.option("--host", default=None, help="default 127.0.0.1 (ARCHSEARCH_HOST)")
@click.option("--port", default=None, type=int, help="default 8000 (ARCHSEARCH_PORT)")
def serve(host: str | None, port: int | None) -> None:
    """Run everything on this machine: API + local job runner, SQLite by default."""
    from archsearch.cli.service import serve_embedded

    serve_embedded(host, port)


@main.command()
@click.option("--host", default=None)
@click.option("--port", default=None, type=int)
def api(host: str | None, port: int | None) -> None:
    """Run the API of a team deployment (needs ARCHSEARCH_DATABASE_URL and ARCHSEARCH_BROKER_URL)."""
    from archsearch.cli.service import serve_team_api

    serve_team_api(host, port)


@main.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="auto: one process per visible GPU, or one CPU process when there is none",
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(device: str, celery_args: tuple[str, ...]) -> None:
    """Run job workers, one job per device at a time (extra arguments go to celery)."""
    from archsearch.cli.service import run_worker

    run_worker(device, list(celery_args))


@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply all migrations to ARCHSEARCH_DATABASE_URL (or the embedded SQLite file)."""
    from archsearch.cli.service import upgrade_database

    console.print(f"database at revision {upgrade_database()}")


@db.command("current")
def db_current() -> None:
    from archsearch.cli.service import database_revisions

    current, head = database_revisions()
    console.print(f"current: {current or '(empty)'}  head: {head}")
    sys.exit(0 if current == head else 1)


@main.command("spec-schema")
@click.argument("method", required=False)
def spec_schema(method: str | None) -> None:
    """Print the JSON schema of job specs (every field, its default and allowed values)."""
    from archsearch.core.spec import JOB_TYPES, job_spec_adapter

    if method is None:
        click.echo(json.dumps(job_spec_adapter.json_schema(), indent=2))
        return
    by_method = {t.model_fields["method"].default: t for t in JOB_TYPES}
    if method not in by_method:
        fail(ValueError(f"unknown method {method!r}; available: {', '.join(by_method)}"))
    click.echo(json.dumps(by_method[method].model_json_schema(), indent=2))


# ---- client commands -----------------------------------------------------------------


@contextmanager
def client_for(url: str) -> Iterator[ArchsearchClient]:
    """A client of `url`; an error answer of the API ends the command with its message."""
    with ArchsearchClient(url, token=os.environ.get("ARCHSEARCH_TOKEN")) as client:
        try:
            yield client
        except ApiError as exc:
            fail(exc)


def fail(error: Exception) -> None:
    console.print(f"[red]error:[/red] {error}")
    sys.exit(1)


@main.command()
@click.argument("spec_file", type=click.File("r"))
@url_option
@click.option("--wait/--no-wait", "wait_", default=False, help="wait for the job to finish")
def submit(spec_file: Any, url: str, wait_: bool) -> None:
    """Submit the job described by SPEC_FILE (JSON; '-' reads standard input)."""
    try:
        spec = json.load(spec_file)
    except json.JSONDecodeError as exc:
        fail(ValueError(f"{spec_file.name} is not valid JSON: {exc}"))
    with client_for(url) as client:
        job = client.submit(spec)
        console.print(job["id"])
        if wait_:
            _wait_with_progress(client, job["id"])


@main.command("list")
@url_option
@click.option("--status", multiple=True)
@click.option("--method", multiple=True)
@click.option("--limit", default=20, show_default=True)
def list_(url: str, status: tuple[str, ...], method: tuple[str, ...], limit: int) -> None:
    """List jobs, newest first."""
    with client_for(url) as client:
        page = client.list_jobs(list(status), list(method), limit=limit)
    table = Table("id", "method", "status", "progress", "test acc", "created")
    for job in page["data"]:
        acc = job["latest_metrics"].get("test_accuracy")
        table.add_row(
            job["id"],
            job["method"],
            job["status"],
            f"{job['progress']:.0%}",
            "" if acc is None else f"{acc:.4f}",
            job["created_at"][:19],
        )
    console.print(table)


@main.command()
@click.argument("job_id")
@url_option
def status(job_id: str, url: str) -> None:
    """Show one job as JSON."""
    with client_for(url) as client:
        console.print_json(data=client.get_job(job_id))


def _wait_with_progress(client: ArchsearchClient, job_id: str) -> dict[str, Any]:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(job_id[:8], total=1.0)

        def update(job: dict[str, Any]) -> None:
            progress.update(
                task, completed=job["progress"], description=f"{job_id[:8]} {job['status']}"
            )

        job = client.wait(job_id, on_update=update)
    message = job["error"] or json.dumps(job["latest_metrics"])
    console.print(f"{job['status']}: {message}")
    if job["status"] != "succeeded":
        sys.exit(1)
    return job


@main.command()
@click.argument("job_id")
@url_option
def wait(job_id: str, url: str) -> None:
    """Wait for a job with a progress bar; exit 1 unless it succeeds."""
    with client_for(url) as client:
        _wait_with_progress(client, job_id)


@main.command()
@click.argument("job_id")
@url_option
def cancel(job_id: str, url: str) -> None:
    """Cancel a queued or running job."""
    with client_for(url) as client:
        job = client.cancel(job_id)
    console.print(f"{job_id}: {job['status']}{' (stopping)' if job['cancel_requested'] else ''}")


@main.command()
@click.argument("job_id")
@click.option(
    "--out", "out", type=click.Path(path_type=Path), default=None, help="default ./JOB_ID"
)
@url_option
def download(job_id: str, out: Path | None, url: str) -> None:
    """Download every artifact of a job into a folder (sha256 checked)."""
    with client_for(url) as client:
        paths = client.download_all(job_id, out or Path(job_id))
    for path in paths:
        console.print(str(path))


from archsearch.cli.admin import admin  # noqa: E402  (command groups of their own)
from archsearch.cli.datasets import datasets  # noqa: E402

main.add_command(admin)
main.add_command(datasets)

if __name__ == "__main__":
    main()
