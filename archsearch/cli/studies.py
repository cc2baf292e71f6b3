"""`archsearch study ...`: submit a study, list studies, follow one, get its results, cancel."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.table import Column, Table

from archsearch.cli.common import client_for, console, unique_prefixes, url_option
from archsearch.client import ArchsearchClient
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.studies import Stat, StudyDetail, StudyPlan, WallTime


@click.group()
def study() -> None:
    """Studies: many jobs comparing methods at equal budget, with their Pareto front."""


@study.command("submit")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--wait", is_flag=True, help="wait for the study to end, then print its table")
@click.option(
    "--dry-run", is_flag=True, help="print its jobs and the compute they take; queue nothing"
)
@url_option
def submit(file: Path, wait: bool, dry_run: bool, url: str) -> None:
    """Submit the study described in FILE (JSON); prints its id."""
    try:
        request = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{file} is not JSON: {exc}", param_hint="FILE") from None
    with client_for(url) as client:
        if dry_run:
            _print_plan(client.plan_study(request))
            return
        created = client.submit_study(request)
        console.print(str(created.id), highlight=False)
        if wait:
            _print_detail(_follow(client, str(created.id)))


@study.command("list")
@click.option("--limit", type=int, default=50, show_default=True)
@url_option
def list_studies(limit: int, url: str) -> None:
    """Studies, newest first, with their jobs by status."""
    with client_for(url) as client:
        studies = client.list_studies(limit)
    # The same short ids as `archsearch list`: every study command takes them.
    short = unique_prefixes([str(s.id) for s in studies])
    table = Table("id", "name", "status", "sampler", "jobs", "created")
    for s in studies:
        jobs = ", ".join(f"{n} {status}" for status, n in sorted(s.counts.items()))
        created = s.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
        table.add_row(short[str(s.id)], s.name, s.status, s.sampler or "-", jobs or "-", created)
    console.print(table)


@study.command("status")
@click.argument("study_id")
@click.option("--wait", is_flag=True, help="follow it until it ends")
@url_option
def status(study_id: str, wait: bool, url: str) -> None:
    """A study's per-arm table (mean ± std over seeds) and its Pareto front."""
    with client_for(url) as client:
        detail = _follow(client, study_id) if wait else client.get_study(study_id)
    _print_detail(detail)


@study.command("results")
@click.argument("study_id")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="folder for results.csv, study.json, pareto.png, curves.png, report.md",
)
@url_option
def results(study_id: str, out: Path | None, url: str) -> None:
    """Download an ended study's artifacts (into ./study-<id> by default)."""
    with client_for(url) as client:
        folder = out or Path(f"study-{study_id}")
        paths = client.download_study(study_id, folder)
    if not paths:
        raise click.ClickException("the study has no artifacts yet; they are built when it ends")
    for path in paths:
        console.print(str(path), highlight=False)


@study.command("cancel")
@click.argument("study_id")
@url_option
def cancel(study_id: str, url: str) -> None:
    """Cancel a study: its queued jobs at once, its running ones at their next step."""
    with client_for(url) as client:
        cancelled = client.cancel_study(study_id)
    console.print(f"study {cancelled.id}: cancel requested ({cancelled.counts})", highlight=False)


def _print_plan(plan: StudyPlan) -> None:
    table = Table("arm", "method", "jobs", "steps/job", "samples/job", "minutes/job")
    for arm in plan.arms:
        table.add_row(
            arm.label,
            arm.method,
            str(arm.jobs),
            f"{arm.optimizer_steps:,}",
            f"{arm.training_samples:,}",
            minutes_text(arm.wall_time),
        )
    console.print(table)
    if plan.wall_time is not None:
        console.print(
            f"wall time: {minutes_text(plan.wall_time)} minutes ({plan.wall_time.basis})",
            highlight=False,
        )
    budget = f"budget {plan.budget_steps:,} steps a job; " if plan.budget_steps else ""
    console.print(
        f"{plan.name}: {plan.jobs} jobs; {budget}{plan.optimizer_steps:,} optimizer steps and "
        f"{plan.training_samples:,} training samples in all. Nothing was queued.",
        highlight=False,
    )


def minutes_text(estimate: WallTime | None) -> str:
    """`12 (8-20)`: the typical minutes and the measured range; `?` before any measurement."""
    if estimate is None or estimate.minutes is None:
        return "?"
    low, high = estimate.minutes_low or 0.0, estimate.minutes_high or 0.0
    typical = f"{estimate.minutes:.3g}"
    return typical if f"{low:.2g}" == f"{high:.2g}" else f"{typical} ({low:.2g}-{high:.2g})"


def _follow(client: ArchsearchClient, study_id: str) -> StudyDetail:
    with console.status("waiting for the study to end") as shown:
        while True:
            detail = client.get_study(study_id)
            shown.update(f"study {detail.status}: {detail.counts}")
            if detail.status.ended and detail.artifacts:
                return detail
            time.sleep(2)


def _stat(value: Stat | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return (
        f"{value.mean:.{digits}g} ± {value.std:.2g}" if value.n > 1 else f"{value.mean:.{digits}g}"
    )


def _ok(counts: dict[str, int], jobs: int) -> str:
    """Succeeded of all, and how many a pruner stopped early (they count as spent)."""
    pruned = counts.get(JobStatus.pruned, 0)
    return f"{counts.get(JobStatus.succeeded, 0)}/{jobs}" + (
        f" ({pruned} pruned)" if pruned else ""
    )


def _print_detail(detail: StudyDetail) -> None:
    console.print(
        f"{detail.name} ({detail.id}): {detail.status}, jobs {detail.counts}", highlight=False
    )
    # Arm labels are what a user acts on: never cut them to fit a narrow terminal.
    widest = max((len(arm.label) for arm in detail.arms), default=3)
    arm_column = Column("arm", no_wrap=True, min_width=widest)
    table = Table(arm_column, "method", "ok", "test accuracy", "parameters", "latency ms", "steps")
    table.add_column("front")
    for arm in detail.arms:
        steps = _stat(arm.optimizer_steps, 6) + (" OVER" if arm.over_budget else "")
        table.add_row(
            arm.label,
            arm.method,
            _ok(arm.counts, arm.jobs),
            _stat(arm.test_accuracy),
            _stat(arm.parameters, 6),
            _stat(arm.latency_ms, 3),
            steps,
            "*" if arm.on_front else "",
        )
    console.print(table)
