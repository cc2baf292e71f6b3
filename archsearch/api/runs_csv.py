"""The runs table as CSV: the rows, columns, filter and sort the dashboard shows, streamed
a page at a time along the listing's keyset walk, and bounded (`MAX_ROWS`)."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session
from starlette.responses import StreamingResponse

from archsearch.api.deps import read_session
from archsearch.api.presenters import jobs_with_owner_names
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import listing
from archsearch.jobs.domain.jobs.columns import FieldKey, value_of
from archsearch.jobs.domain.jobs.listing import JobFilters
from archsearch.jobs.platform.services import Services
from archsearch.schemas.jobs import JobPublic

# The table's own columns, in its order; the chosen metric and spec columns follow.
BASE_COLUMNS = (
    "id", "method", "status", "progress", "test_accuracy", "parameters", "duration_s",
    "study_id", "study_arm", "dataset", "tags", "created_at", "owner",
)  # fmt: skip
MAX_ROWS = 10_000
_PAGE = 500
# A spreadsheet runs a cell that starts so as a formula: a label or tag must stay text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class CsvResponse(StreamingResponse):
    media_type = "text/csv"


def _duration(job: JobPublic) -> float | None:
    if job.started_at is None:
        return None
    end: datetime = job.finished_at or utcnow()
    return round((end - job.started_at).total_seconds(), 3)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _row(job: JobPublic, keys: Sequence[FieldKey]) -> list[Any]:
    dataset = job.spec.get("dataset") or {}
    base = [
        job.id, job.method, job.status.value, job.progress,
        job.latest_metrics.get("test_accuracy"), job.latest_metrics.get("parameters"),
        _duration(job), job.study_id, job.study_arm,
        dataset.get("name") or dataset.get("id") if isinstance(dataset, dict) else None,
        " ".join(job.tags), job.created_at.isoformat(),
        job.owner_name or (str(job.owner_id) if job.owner_id else "local"),
    ]  # fmt: skip
    chosen = [value_of(job.latest_metrics, job.spec, key) for key in keys]
    return [_cell(v) for v in base + chosen]


def _line(cells: Sequence[Any]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)
    return out.getvalue()


Page = tuple[list[JobPublic], str | None]  # the jobs, and the cursor after them


async def fetch_page(
    services: Services, filters: JobFilters, sort: str, after: str | None, size: int
) -> Page:
    """One page of the walk, in a fresh session: a slow reader holds no connection between
    pages."""

    def page(session: Session) -> Page:
        jobs, next_cursor = listing.list_jobs(session, filters, sort=sort, limit=size, cursor=after)
        return jobs_with_owner_names(session, jobs), next_cursor

    async with read_session(services) as session:
        return await session.run_sync(page)


async def csv_lines(
    services: Services,
    filters: JobFilters,
    sort: str,
    keys: Sequence[FieldKey],
    limit: int,
    first: Page,
) -> AsyncIterator[str]:
    """The header, then one line a job, `limit` jobs at most. The first page is read before
    the answer starts (`first_page_size`), so an outage of the database is a 503, not a
    200 cut short."""
    yield _line([*BASE_COLUMNS, *(key.name for key in keys)])
    jobs, cursor = first
    written = 0
    while True:
        yield "".join(_line(_row(job, keys)) for job in jobs)
        written += len(jobs)
        if cursor is None or written >= limit:
            return
        jobs, cursor = await fetch_page(
            services, filters, sort, cursor, min(_PAGE, limit - written)
        )


def first_page_size(limit: int) -> int:
    return min(_PAGE, limit)
