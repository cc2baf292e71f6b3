"""`archsearch models ...`: the team's model registry from the command line.

archsearch models list
archsearch models show NAME
archsearch models promote NAME JOB_ID [--description TEXT]
archsearch models alias NAME ALIAS VERSION      (or --remove)
archsearch models archive NAME VERSION          (or --restore)
archsearch models download NAME@ALIAS|NAME@3|NAME [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from archsearch.cli.common import client_for, console, local_time, url_option
from archsearch.client.models import parse_model_ref
from archsearch.schemas.models import ModelDetail, ModelVersionPublic


@click.group()
def models() -> None:
    """Named, versioned models promoted from succeeded jobs, with aliases."""


@models.command("list")
@url_option
def list_models(url: str) -> None:
    """The team's models with their latest version and aliases (an admin's token: every
    team's, with a team column)."""
    with client_for(url) as client:
        found = client.list_models()
    teams = len({m.team_id for m in found}) > 1
    table = Table("name", "latest", "aliases", "updated", *(["team"] if teams else []))
    for m in found:
        aliases = ", ".join(f"{a.alias}->{a.version}" for a in m.aliases)
        row = [m.name, str(m.latest_version), aliases or "-", local_time(m.updated_at)]
        table.add_row(*row, *([str(m.team_id)[:8]] if teams else []))
    console.print(table)


@models.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print the model as JSON")
@url_option
def show(name: str, as_json: bool, url: str) -> None:
    """A model's versions, key metrics first (then lineage, files), and its alias history;
    archived versions last. One key/value block per version: readable at 80 columns."""
    with client_for(url) as client:
        detail = client.get_model(name)
    if as_json:
        click.echo(detail.model_dump_json(indent=2))
        return
    _print_detail(detail)


def _print_detail(detail: ModelDetail) -> None:
    aliases = ", ".join(f"{a.alias} -> {a.version}" for a in detail.aliases) or "none"
    console.print(
        f"[bold]{escape(detail.name)}[/bold]  latest version {detail.latest_version}"
        f"  aliases: {escape(aliases)}",
        highlight=False,
    )
    ordered = [v for v in detail.versions if v.archived_at is None]
    ordered += [v for v in detail.versions if v.archived_at is not None]
    for version in ordered:
        console.print()
        console.print(_version_block(version))
    if detail.alias_history:
        console.print()
        console.print("[bold]alias history[/bold]")
    for event in detail.alias_history:
        move = f"{event.from_version or '-'} -> {event.to_version or 'removed'}"
        console.print(
            f"  {local_time(event.at)}  {escape(event.alias)}: {move} by {escape(event.actor)}",
            highlight=False,
        )


def _version_block(v: ModelVersionPublic) -> Table:
    """Keys in a narrow column that never wraps; values wrap, so no number is ever cut."""
    title = f"version {v.version}" + (f" ({', '.join(v.aliases)})" if v.aliases else "")
    if v.archived_at is not None:
        title += f" - archived {local_time(v.archived_at)} by {v.archived_by}"
    table = Table.grid(padding=(0, 2))
    table.title, table.title_justify, table.title_style = title, "left", "bold"
    table.add_column(no_wrap=True, style="cyan")
    table.add_column(overflow="fold")
    for key, value in _version_rows(v):
        table.add_row(key, Text(value))
    return table


def _version_rows(v: ModelVersionPublic) -> list[tuple[str, str]]:
    metrics = v.lineage.metrics
    rows = [(KEY_LABELS.get(k, k), metric_text(k, metrics[k])) for k in v.key_metrics]
    job = f"{v.lineage.job_id} ({v.lineage.method})"
    rows.append(("job", job))
    if v.study_id is not None:
        rows.append(("study", str(v.study_id)))
    for parent in v.parents:
        promoted = f" = {parent.model}@{parent.version}" if parent.model else ""
        rows.append((f"built on ({parent.field})", f"{parent.job_id}{promoted}"))
    dataset = v.lineage.dataset or {}
    rows.append(("dataset", str(dataset.get("name") or dataset.get("id") or "-")))
    rows.append(("files", ", ".join(f.name for f in v.files)))
    rows.append(("promoted", f"{local_time(v.created_at)} by {v.created_by}"))
    if v.description:
        rows.append(("description", v.description))
    rest = sorted(k for k in metrics if k not in v.key_metrics)
    rows.extend((k, metric_text(k, metrics[k])) for k in rest)
    return rows


KEY_LABELS = {
    "test_accuracy": "test accuracy",
    "parameters_compact": "parameters (compact)",
    "weight_density": "weight density",
    "latency_batch_1_compact_ms": "latency, batch 1",
    "latency_batch_1_dense_ms": "latency, batch 1",
}


def metric_text(name: str, value: float) -> str:
    """A metric in full: counts as integers with separators, latencies with their unit."""
    if float(value).is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    text = f"{value:.6g}"
    return f"{text} ms" if name.endswith("_ms") else text


@models.command("archive")
@click.argument("name")
@click.argument("version", type=int)
@click.option("--restore", is_flag=True, help="restore an archived version instead")
@url_option
def archive(name: str, version: int, restore: bool, url: str) -> None:
    """Archive VERSION of NAME (files stay downloadable; refused while an alias points at
    it), or --restore it."""
    with client_for(url) as client:
        client.archive_version(name, version, archived=not restore)
    console.print(f"{name}@{version}: {'restored' if restore else 'archived'}", highlight=False)


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
