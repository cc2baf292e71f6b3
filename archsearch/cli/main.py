"""The `archsearch` command: talk to a server (submit, list, status, wait, cancel, download,
datasets) and, with the `server` extra, run one (serve, api, worker, db, admin).

Every command that takes a job id takes any unique prefix of it, as git does with hashes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, get_args

import click
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from archsearch.cli.common import (
    EXIT_FAILED,
    EXIT_WARNINGS,
    SHORT_ID,
    client_for,
    compact_count,
    console,
    duration_text,
    fail,
    local_time,
    unique_prefixes,
    url_option,
)
from archsearch.cli.datasets import datasets
from archsearch.cli.models import models
from archsearch.cli.server_commands import WithServerCommands
from archsearch.cli.specs import spec_problems, spec_schema
from archsearch.cli.studies import study
from archsearch.cli.summary import print_summary
from archsearch.cli.usage import usage
from archsearch.cli.webhooks import webhooks
from archsearch.client import ArchsearchClient
from archsearch.schemas.jobs import JobPublic, JobSort, JobStatus
from archsearch.schemas.logs import JobLogLinePublic


@click.group(cls=WithServerCommands)
@click.version_option(
    package_name="archsearch", prog_name="archsearch", message="%(prog)s %(version)s"
)
def main() -> None:
    """archsearch: search, prune and grow neural architectures as jobs."""


main.add_command(datasets)
main.add_command(study)
main.add_command(models)
main.add_command(usage)
main.add_command(webhooks)
main.add_command(spec_schema)


@main.command()
@click.argument("spec_file", type=click.File("r"))
@url_option
@click.option("--wait/--no-wait", "wait_", default=False, help="wait for the job to finish")
@click.option("--tag", "tags", multiple=True, help="tag the job (repeatable)")
@click.option(
    "--json", "as_json", is_flag=True, help="print the job as JSON (with --wait: as it ended)"
)
def submit(spec_file: IO[str], url: str, wait_: bool, tags: tuple[str, ...], as_json: bool) -> None:
    """Submit the job described by SPEC_FILE (JSON; '-' reads standard input). Prints its id;
    with --wait, a progress bar and then a short summary (status, key metrics, where the
    files are), or with --json the job's JSON alone, for scripts."""
    try:
        spec = json.load(spec_file)
    except json.JSONDecodeError as exc:
        fail(f"{spec_file.name} is not valid JSON: {exc}")
    if problems := spec_problems(spec):
        fail(
            f"{spec_file.name} is not a valid job spec (nothing was sent):\n" + "\n".join(problems)
        )
    with client_for(url) as client:
        job = client.submit(spec, tags=tags)
        if not as_json:
            console.print(str(job.id))
        if wait_:
            _wait_with_progress(client, job, url, as_json)
        elif as_json:
            click.echo(job.model_dump_json(indent=2))


@main.command("list")
@url_option
@click.option("--status", multiple=True, help="only jobs in this status (repeatable)")
@click.option("--method", multiple=True, help="only jobs of this method (repeatable)")
@click.option("--tag", multiple=True, help="only jobs carrying this tag (repeatable: all of them)")
@click.option("--study", default=None, help="only the jobs of this study (id or unique prefix)")
@click.option("--no-study-jobs", is_flag=True, help="leave out the jobs of studies")
@click.option(
    "--sort",
    type=click.Choice(get_args(JobSort)),
    default="-created_at",
    show_default=True,
    help="order by a column; a leading - sorts descending",
)
@click.option("--limit", default=20, show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="print only the full ids, one a line")
def list_(
    url: str,
    status: tuple[str, ...],
    method: tuple[str, ...],
    tag: tuple[str, ...],
    study: str | None,
    no_study_jobs: bool,
    sort: str,
    limit: int,
    quiet: bool,
) -> None:
    """List jobs (newest first, or --sort); any command takes the id shown (or the full id)."""
    with client_for(url) as client:
        study_id = client.resolve_study_id(study) if study else None
        jobs = client.list_jobs(
            list(status),
            list(method),
            limit=limit,
            tag=tag,
            study=study_id,
            sort=sort,
            study_jobs=not no_study_jobs,
        ).data
    if quiet:
        click.echo("".join(f"{job.id}\n" for job in jobs), nl=False)
        return
    table = _jobs_table(jobs)
    # Never fold a row, even in a narrow terminal or a pipe: ids and times are copied from it.
    natural_width = Measurement.get(console, console.options.update_width(10_000), table).maximum
    Console(width=max(console.width, natural_width)).print(table)


def _jobs_table(jobs: list[JobPublic]) -> Table:
    short = unique_prefixes([str(job.id) for job in jobs])
    table = Table(box=box.SIMPLE)
    headers = ("id", "method", "status", "progress", "test acc", "params", "duration")
    for header in (*headers, "study/arm", "owner", "created"):
        table.add_column(header, no_wrap=True)
    for job in jobs:
        acc = job.latest_metrics.get("test_accuracy")
        study = f"{str(job.study_id)[:8]}/{job.study_arm or ''}" if job.study_id else ""
        table.add_row(
            short[str(job.id)] + (" !" if job.warnings else ""),
            job.method,
            job.status,
            f"{job.progress:.0%}",
            "" if acc is None else f"{acc:.4f}",
            compact_count(job.latest_metrics.get("parameters")),
            duration_text(job),
            study,
            job.owner_name or ("" if job.owner_id is None else str(job.owner_id)[:8]),
            local_time(job.created_at),
        )
    return table


@main.command()
@click.argument("job_id")
@url_option
def status(job_id: str, url: str) -> None:
    """Show one job as JSON (timestamps in UTC)."""
    with client_for(url) as client:
        job = client.get_job(client.resolve_job_id(job_id))
    console.print_json(job.model_dump_json())


def _wait_with_progress(
    client: ArchsearchClient, job: JobPublic, url: str, as_json: bool = False
) -> JobPublic:
    short = str(job.id)[:SHORT_ID]
    if as_json:  # no bar: standard output is the JSON alone
        job = client.wait(job.id)
        click.echo(job.model_dump_json(indent=2))
    else:
        job = _follow_with_bar(client, job, short)
        artifacts = client.artifacts(job.id) if job.status is JobStatus.succeeded else []
        print_summary(job, artifacts, url.rstrip("/"), short)
    if job.status is not JobStatus.succeeded:
        sys.exit(EXIT_FAILED)
    if job.warnings:
        sys.exit(EXIT_WARNINGS)
    return job


def _follow_with_bar(client: ArchsearchClient, job: JobPublic, short: str) -> JobPublic:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(short, total=1.0)

        def update(current: JobPublic) -> None:
            progress.update(
                task, completed=current.progress, description=f"{short} {current.status}"
            )

        return client.wait(job.id, on_update=update)


@main.command()
@click.argument("job_id")
@url_option
@click.option("--json", "as_json", is_flag=True, help="print the ended job as JSON")
def wait(job_id: str, url: str, as_json: bool) -> None:
    """Wait for a job with a progress bar, then a short summary; exit 1 unless it succeeds,
    3 if it succeeded with a usefulness warning (collapsed or chance-level predictions)."""
    with client_for(url) as client:
        job = client.get_job(client.resolve_job_id(job_id))
        _wait_with_progress(client, job, url, as_json)


@main.command()
@click.argument("job_id")
@url_option
def cancel(job_id: str, url: str) -> None:
    """Cancel a queued or running job."""
    with client_for(url) as client:
        job = client.cancel(client.resolve_job_id(job_id))
    console.print(f"{job.id}: {job.status}{' (stopping)' if job.cancel_requested else ''}")


@main.command()
@click.argument("job_id")
@click.option("-f", "--follow", is_flag=True, help="keep printing new lines until the job ends")
@url_option
def logs(job_id: str, follow: bool, url: str) -> None:
    """Print a job's log lines (what its method logged, worker messages, tracebacks)."""
    with client_for(url) as client:
        full_id = client.resolve_job_id(job_id)
        if follow:
            for line in client.follow_logs(full_id):
                _echo_log_line(line)
            return
        page = client.logs(full_id)
        while page.data:  # every page, not just the first
            for line in page.data:
                _echo_log_line(line)
            page = client.logs(full_id, after=page.next_after)
    if page.truncated:
        console.print("[yellow]the job logged more than the server keeps[/yellow]")


def _echo_log_line(line: JobLogLinePublic) -> None:
    # Plain lines, never wrapped: logs are read with grep and less.
    click.echo(f"{local_time(line.at)} {line.level:<7} {line.logger}: {line.message}")


@main.command()
@click.argument("job_id")
@click.option(
    "--out", "out", type=click.Path(path_type=Path), default=None, help="default ./JOB_ID"
)
@url_option
def download(job_id: str, out: Path | None, url: str) -> None:
    """Download every artifact of a job into a folder (sha256 checked)."""
    with client_for(url) as client:
        full_id = client.resolve_job_id(job_id)
        paths = client.download_all(full_id, out or Path(str(full_id)))
    for path in paths:
        console.print(str(path), highlight=False)


if __name__ == "__main__":
    main()
