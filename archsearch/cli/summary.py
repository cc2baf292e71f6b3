"""The few lines `submit --wait` and `wait` end with: the outcome, the key metrics, and where
the files are (their URLs and the `archsearch download` command), not a wall of JSON."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from archsearch.cli.common import compact_count, console, duration_text
from archsearch.schemas.artifacts import ArtifactPublic
from archsearch.schemas.jobs import JobPublic, JobStatus

# What a reader of a finished job looks at first, in this order, when the job reported it.
SUMMARY_METRICS = (
    ("test_accuracy", "test accuracy"),
    ("test_loss", "test loss"),
    ("parameters", "parameters"),
    ("parameters_compact", "parameters (compact)"),
    ("density", "density"),
    ("latency_batch_1_compact_ms", "latency, batch 1 (ms)"),
)
COUNTS = {"parameters", "parameters_compact"}


def print_summary(job: JobPublic, artifacts: list[ArtifactPublic], url: str, short: str) -> None:
    took = duration_text(job)
    dataset = job.spec.get("dataset", {}) if isinstance(job.spec, dict) else {}
    name = dataset.get("name") or dataset.get("id") or "?"
    console.print(
        f"[bold]{job.status}[/bold]{f' in {took}' if took else ''}: {job.method} on {escape(name)}",
        highlight=False,
    )
    if job.error:
        console.print(f"  {escape(job.error)}", highlight=False)
    if rows := _metric_rows(job.latest_metrics):
        table = Table.grid(padding=(0, 2))
        table.add_column(no_wrap=True, style="cyan")
        table.add_column()
        for label, value in rows:
            table.add_row(f"  {label}", value)
        console.print(table)
    for warning in job.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning.message)} ({warning.code})")
    if artifacts and job.status is JobStatus.succeeded:
        names = ", ".join(a.name for a in artifacts)
        console.print(f"files ({len(artifacts)}): {names}", highlight=False, soft_wrap=True)
        console.print(
            f"  at {url}/v1/jobs/{job.id}/artifacts/NAME", highlight=False, soft_wrap=True
        )
        console.print(f"  download all: archsearch download {short}", highlight=False)


def _metric_rows(metrics: dict[str, float]) -> list[tuple[str, str]]:
    rows = []
    for key, label in SUMMARY_METRICS:
        if key in metrics:
            value = metrics[key]
            rows.append((label, compact_count(value) if key in COUNTS else f"{value:.4g}"))
    return rows
