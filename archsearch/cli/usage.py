"""`archsearch usage`: device time by team, user or method over a period (`GET /v1/usage`).

archsearch usage                                   the last 7 days (the quota's window)
archsearch usage --from 2026-11-01 --to 2026-12-01 --group-by user
archsearch usage --json
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

import click
from rich import box
from rich.table import Table

from archsearch.cli.common import client_for, console, local_time, url_option
from archsearch.schemas.usage import UsageGroup, UsagePublic

GROUPS = ("team", "user", "method")


@click.command()
@click.option(
    "--from",
    "start",
    type=click.DateTime(),
    default=None,
    help="start, inclusive (UTC); give --to too",
)
@click.option("--to", "end", type=click.DateTime(), default=None, help="end, exclusive (UTC)")
@click.option("--group-by", type=click.Choice(GROUPS), default="team", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the API's JSON answer")
@url_option
def usage(
    start: datetime | None, end: datetime | None, group_by: str, as_json: bool, url: str
) -> None:
    """Device-hours and jobs per group and device; default window: the last 7 days."""
    if (start is None) != (end is None):
        raise click.UsageError("give both --from and --to, or neither for the last 7 days")
    with client_for(url) as client:
        report = client.usage(start, end, cast(UsageGroup, group_by))
    if as_json:
        click.echo(report.model_dump_json(indent=2))
        return
    _print_report(report)


def _print_report(report: UsagePublic) -> None:
    console.print(
        f"device time from {local_time(report.start)} to {local_time(report.end)}, "
        f"by {report.group_by}",
        highlight=False,
    )
    if not report.data:
        console.print("no device time in this period")
        return
    table = Table(box=box.SIMPLE)
    for header in (report.group_by, "device", "device-hours", "attempts", "jobs"):
        table.add_column(header, no_wrap=True, justify="left" if header.isalpha() else "right")
    for row in report.data:
        table.add_row(
            row.group, row.device, f"{row.device_hours:.3f}", str(row.attempts), str(row.jobs)
        )
    console.print(table)
