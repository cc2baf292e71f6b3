"""`archsearch models ...`: the team's model registry from the command line.

archsearch models list
archsearch models show NAME
archsearch models promote NAME JOB_ID [--description TEXT]
archsearch models alias NAME ALIAS VERSION      (or --remove)
archsearch models download NAME@ALIAS|NAME@3|NAME [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from archsearch.cli.common import client_for, console, local_time, url_option
from archsearch.client.models import parse_model_ref
from archsearch.schemas.models import ModelDetail


@click.group()
def models() -> None:
    """Named, versioned models promoted from succeeded jobs, with aliases."""


@models.command("list")
@url_option
def list_models(url: str) -> None:
    """The team's models with their latest version and aliases."""
    with client_for(url) as client:
        found = client.list_models()
    table = Table("name", "latest", "aliases", "updated")
    for m in found:
        aliases = ", ".join(f"{a.alias}->{a.version}" for a in m.aliases)
        table.add_row(m.name, str(m.latest_version), aliases or "-", local_time(m.updated_at))
    console.print(table)


@models.command("show")
@click.argument("name")
@url_option
def show(name: str, url: str) -> None:
    """A model's versions (job, metrics, files) and its alias history."""
    with client_for(url) as client:
        _print_detail(client.get_model(name))


def _print_detail(detail: ModelDetail) -> None:
    table = Table("version", "aliases", "job", "metrics", "files", "by", "created")
    for v in detail.versions:
        metrics = ", ".join(f"{k}={value:.4g}" for k, value in sorted(v.lineage.metrics.items()))
        table.add_row(
            str(v.version),
            ", ".join(v.aliases) or "-",
            str(v.lineage.job_id)[:8],
            metrics or "-",
            ", ".join(f.name for f in v.files),
            v.created_by,
            local_time(v.created_at),
        )
    console.print(table)
    for event in detail.alias_history:
        move = f"{event.from_version or '-'} -> {event.to_version or 'removed'}"
        console.print(f"{local_time(event.at)}  {event.alias}: {move} by {event.actor}")


@models.command("promote")
@click.argument("name")
@click.argument("job_id")
@click.option("--description", default="", help="what this version is")
@url_option
def promote(name: str, job_id: str, description: str, url: str) -> None:
    """Make a succeeded job's artifacts the next version of NAME; prints the version."""
    with client_for(url) as client:
        version = client.promote(name, client.resolve_job_id(job_id), description)
    console.print(f"{name}@{version.version}", highlight=False)


@models.command("alias")
@click.argument("name")
@click.argument("alias")
@click.argument("version", type=int, required=False)
@click.option("--remove", is_flag=True, help="remove the alias instead of setting it")
@url_option
def alias(name: str, alias: str, version: int | None, remove: bool, url: str) -> None:
    """Point ALIAS of NAME at VERSION (e.g. production 3), or remove it with --remove."""
    if not remove and version is None:
        raise click.BadParameter("give the VERSION the alias points at, or --remove")
    with client_for(url) as client:
        if remove:
            client.remove_alias(name, alias)
            console.print(f"{name}: {alias} removed", highlight=False)
        else:
            assert version is not None
            client.set_alias(name, alias, version)
            console.print(f"{name}: {alias} -> {version}", highlight=False)


@models.command("download")
@click.argument("ref")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None)
@url_option
def download(ref: str, out: Path | None, url: str) -> None:
    """Download every file of NAME@ALIAS, NAME@VERSION or NAME (its latest version)."""
    name, version = parse_model_ref(ref)
    folder = out or Path(f"{name}-{version or 'latest'}")
    with client_for(url) as client:
        paths = client.download_model(name, version or None, folder)
    for path in paths:
        console.print(str(path), highlight=False)
