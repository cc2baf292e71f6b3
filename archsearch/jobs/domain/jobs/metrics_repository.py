"""What `/metrics` reports about jobs and workers, read from the database at scrape time.

Workers write their jobs' rows and their heartbeats to the database; the API reads the
figures back from there, so no worker needs an endpoint of its own and nothing is shared
on disk. Histograms of durations are computed from the rows (`finished_at - started_at`
for run time, `started_at - created_at` for the wait until a worker claimed the job) in
SQL, one pass per histogram, whatever the number of jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Float, and_, case, func, or_, select, type_coerce
from sqlalchemy.orm import InstrumentedAttribute, Session

from archsearch.jobs.domain.base import as_utc
from archsearch.jobs.domain.tables import Job, JobEvent, WorkerRecord
from archsearch.schemas.jobs import JobStatus

TERMINAL = [s for s in JobStatus if s.terminal]
# The reasons a run fails with (executor, reaper, submit); anything else counts as "other",
# which keeps the label's values a small fixed set.
FAILURE_REASONS = (
    "user error",
    "out of memory",
    "crashed",
    "attempts exhausted",
    "queue unreachable",
)


@dataclass(frozen=True)
class Histogram:
    """Cumulative counts per upper bound (the last bound is +Inf), and the sum."""

    label: str
    bucket_counts: list[int]
    count: int
    total: float


def jobs_by_status_and_method(session: Session) -> list[tuple[str, str, int]]:
    query = select(Job.status, Job.method, func.count()).group_by(Job.status, Job.method)
    return [
        (JobStatus(status).value, method, int(n)) for status, method, n in session.execute(query)
    ]


def queued_by_device(session: Session) -> dict[str, tuple[int, datetime]]:
    """Per device: how many jobs wait, and when the oldest of them was submitted."""
    query = (
        select(Job.device, func.count(), func.min(Job.created_at))
        .where(Job.status == JobStatus.queued)
        .group_by(Job.device)
    )
    return {device: (int(n), as_utc(oldest)) for device, n, oldest in session.execute(query)}


def live_workers_by_device(session: Session, since: datetime) -> dict[str, int]:
    query = select(WorkerRecord.device).where(WorkerRecord.heartbeat_at >= since)
    return dict(Counter(session.scalars(query)))


def failures_by_reason(session: Session) -> dict[str, int]:
    """Failed jobs per reason class, from the event that failed each of them."""
    query = (
        select(JobEvent.reason, func.count())
        .where(JobEvent.to_status == JobStatus.failed.value)
        .where(or_(JobEvent.from_status.is_(None), JobEvent.from_status != JobEvent.to_status))
        .group_by(JobEvent.reason)
    )
    counts: Counter[str] = Counter()
    for reason, n in session.execute(query):
        counts[reason if reason in FAILURE_REASONS else "other"] += int(n)
    return dict(counts)


def run_seconds_by_method(session: Session, bounds: Sequence[float]) -> list[Histogram]:
    """Run time of finished jobs (their last attempt), per method."""
    finished = and_(Job.status.in_(TERMINAL), Job.started_at.is_not(None))
    finished = and_(finished, Job.finished_at.is_not(None))
    return _histograms(session, Job.started_at, Job.finished_at, finished, bounds)


def claim_seconds_by_method(session: Session, bounds: Sequence[float]) -> list[Histogram]:
    """Time from submit to the latest claim of every job a worker has started."""
    return _histograms(session, Job.created_at, Job.started_at, Job.started_at.is_not(None), bounds)


def figure_by_method(
    session: Session, metric: str, bounds: Sequence[float], scale: float = 1.0
) -> list[Histogram]:
    """A run figure (`jobs/runtime/figures.py`) of succeeded jobs' last runs, per method:
    `latest_metrics[metric]` times `scale`, jobs without it left out."""
    figure = Job.latest_metrics[metric].as_float()
    where = and_(Job.status == JobStatus.succeeded, figure.is_not(None))
    value = type_coerce(figure * scale, Float)
    return _value_histograms(session, value, where, bounds)


def _histograms(
    session: Session,
    start: InstrumentedAttribute[Any],
    end: InstrumentedAttribute[Any],
    where: ColumnElement[bool],
    bounds: Sequence[float],
) -> list[Histogram]:
    return _value_histograms(session, _seconds_between(session, start, end), where, bounds)


def _value_histograms(
    session: Session,
    value: ColumnElement[float],
    where: ColumnElement[bool],
    bounds: Sequence[float],
) -> list[Histogram]:
    per_bound = [func.sum(case((value <= bound, 1), else_=0)) for bound in bounds]
    query = (
        select(Job.method, func.count(), func.sum(value), *per_bound)
        .where(where)
        .group_by(Job.method)
    )
    return [
        Histogram(method, [int(c or 0) for c in cumulative] + [int(n)], int(n), float(total or 0))
        for method, n, total, *cumulative in session.execute(query)
    ]


def _seconds_between(
    session: Session, start: InstrumentedAttribute[Any], end: InstrumentedAttribute[Any]
) -> ColumnElement[float]:
    if session.get_bind().dialect.name == "postgresql":
        return type_coerce(func.extract("epoch", end - start), Float)
    # SQLite keeps timestamps as text; julianday() reads them as fractional days (good to
    # about a millisecond, plenty for these buckets).
    return type_coerce((func.julianday(end) - func.julianday(start)) * 86400.0, Float)


def heartbeat_cutoff(now: datetime, lease_seconds: float) -> datetime:
    """A worker seen within one lease is alive (as `GET /v1/workers` says)."""
    return now - timedelta(seconds=lease_seconds)
