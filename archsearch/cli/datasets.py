"""`archsearch datasets ...`: list, upload, show and delete the datasets a server trains on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from archsearch.cli.common import client_for, console, url_option
from archsearch.schemas.datasets import UploadedDatasetPublic


@click.group()
def datasets() -> None:
    """Datasets the server can train on: built in, or uploaded by you."""


@datasets.command("list")
@url_option
def list_datasets(url: str) -> None:
    """List the datasets the server can train on (built-ins, then uploads)."""
    with client_for(url) as client:
        rows = client.datasets()
    table = Table("id / name", "input", "classes", "train", "test", "description")
    for d in rows:
        table.add_row(
            d.id or d.name,
            "x".join(map(str, d.input_shape)),
            str(d.num_classes),
            str(d.train_size),
            str(d.test_size),
            d.description if d.id is None else f"{d.name}: {d.description}",
        )
    console.print(table)


@datasets.command("upload")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", default=None, help="display name (default: the file name)")
@click.option(
    "--label-column", default=None, help="csv: the column holding the labels (default 'label')"
)
@click.option(
    "--test-fraction",
    type=float,
    default=None,
    help="split made when the file has no test set (default 0.2)",
)
@click.option("--split-seed", type=int, default=None, help="seed of that split (default 0)")
@click.option("--num-classes", type=int, default=None, help="default: largest label + 1")
@url_option
def upload(file: Path, url: str, **options: Any) -> None:
    """Upload FILE: .npz (x, y[, x_test, y_test]), .csv, or .zip (IDX files or image folders).

    Prints the dataset id; use it in a job as {"dataset": {"id": "<id>"}}."""
    with client_for(url) as client:
        dataset = client.upload_dataset(file, **options)
    console.print(dataset.id)
    _describe(dataset)


@datasets.command("show")
@click.argument("dataset_id")
@click.option(
    "--preview",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="also save the preview grid (PNG) here",
)
@url_option
def show(dataset_id: str, preview: Path | None, url: str) -> None:
    """Show an uploaded dataset's metadata and statistics."""
    with client_for(url) as client:
        dataset = client.get_dataset(dataset_id)
        if preview is not None:
            preview.write_bytes(client.dataset_preview(dataset_id))
    console.print_json(dataset.model_dump_json())


@datasets.command("delete")
@click.argument("dataset_id")
@url_option
def delete(dataset_id: str, url: str) -> None:
    """Delete an uploaded dataset (refused while a queued or running job uses it)."""
    with client_for(url) as client:
        client.delete_dataset(dataset_id)
    console.print(f"deleted {dataset_id}")


def _describe(dataset: UploadedDatasetPublic) -> None:
    shape = "x".join(map(str, dataset.input_shape))
    console.print(
        f"{dataset.name}: {dataset.format} {dataset.kind} {shape}, "
        f"{dataset.num_classes} classes, {dataset.train_size} train / {dataset.test_size} test "
        f"(split: {dataset.split['source']})",
        highlight=False,
    )
