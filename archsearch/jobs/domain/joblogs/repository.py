"""SQL of job log lines: append a batch, measure what a job has stored, read a page."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.joblogs.tables import JobLogLine
from archsearch.jobs.domain.jobs import repository as jobs

# The line written once when a job's log reaches its size limit.
TRUNCATED = "[log truncated: the job logged more than job_log_max_bytes; later lines dropped]"


@dataclass(frozen=True)
class PendingLine:
    at: datetime
    level: str
    logger: str
    message: str


def append_lines(session: Session, job_id: uuid.UUID, lines: Sequence[PendingLine]) -> None:
    if not lines:
        return
    rows = [{"job_id": job_id, **asdict(line)} for line in lines]
    session.execute(insert(JobLogLine), rows)


def stored_bytes(session: Session, job_id: uuid.UUID) -> int:
    """What the job's lines already weigh (a resumed job goes on from there)."""
    query = select(func.coalesce(func.sum(func.length(JobLogLine.message)), 0)).where(
        JobLogLine.job_id == job_id
    )
    return int(session.scalar(query) or 0)


def read_page(
    session: Session, job_id: uuid.UUID, team_id: uuid.UUID | None, after: int, limit: int
) -> tuple[list[JobLogLine], bool]:
    """Lines after `after` of a job the caller may see (another team's job is missing),
    oldest first, and whether the job's log was truncated."""
    jobs.get_job(session, job_id, team_id=team_id)
    query = (
        select(JobLogLine)
        .where(JobLogLine.job_id == job_id, JobLogLine.id > after)
        .order_by(JobLogLine.id)
        .limit(limit)
    )
    marker = select(JobLogLine.id).where(
        JobLogLine.job_id == job_id, JobLogLine.message == TRUNCATED
    )
    return list(session.scalars(query)), session.scalar(marker.limit(1)) is not None


def read_page_while_running(
    session: Session, job_id: uuid.UUID, team_id: uuid.UUID | None, after: int, limit: int
) -> tuple[list[JobLogLine], bool]:
    """Lines after `after`, and whether the job had already finished before they were read
    (then an empty page means its log is complete: a follower may stop)."""
    finished = jobs.get_job(session, job_id, team_id=team_id).status.terminal
    lines, _ = read_page(session, job_id, team_id, after, limit)
    return lines, finished
