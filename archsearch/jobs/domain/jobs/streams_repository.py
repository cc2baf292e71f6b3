"""The reads behind live job streams: what changed since a stream's position, for many jobs
in one query per kind (job rows, metric points, events), whatever the number of clients.

Metric points are read on by `metrics.seq`, which the database raises whenever a point is
inserted or its value changes (migration 0009); events by their id. Both only grow per job,
and one job has one writer at a time (its worker, under the lease; transitions lock the job
row), so a row committed later never carries a smaller number than one already read for
the same job: a per-job position misses nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    Uuid,
    and_,
    bindparam,
    cast,
    false,
    func,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import InstrumentedAttribute, Session

from archsearch.jobs.domain.tables import Job, JobEvent, Metric

AnySelect = TypeVar("AnySelect", bound="Select[*tuple[Any, ...]]")

# What a stream compares to tell that a job changed; the JSON spec is left out, and the
# full row is read only for the jobs that did change.
WATCH_COLUMNS = (
    Job.id,
    Job.team_id,
    Job.method,
    Job.status,
    Job.step,
    Job.total_steps,
    Job.latest_metrics,
    Job.cancel_requested,
    Job.priority,
    Job.attempts,
    Job.worker,
    Job.updated_at,
)


@dataclass(frozen=True)
class MetricRow:
    job_id: uuid.UUID
    seq: int
    step: int
    name: str
    value: float


def latest_job_change(session: Session, team_id: uuid.UUID | None) -> datetime | None:
    """When a job the caller may see last changed: the jobs stream reads it before it starts,
    so an unreachable database answers 503 like every route instead of a silent stream."""
    query = select(func.max(Job.updated_at))
    if team_id is not None:
        query = query.where(Job.team_id == team_id)
    return session.execute(query).scalar_one_or_none()


def watched_jobs(
    session: Session, job_ids: Collection[uuid.UUID], updated_since: datetime | None
) -> list[Any]:
    """The light rows of `job_ids`, and of every job updated after `updated_since` (None:
    none but those)."""
    wanted: list[ColumnElement[bool]] = [Job.id.in_(job_ids)] if job_ids else []
    if updated_since is not None:
        wanted.append(Job.updated_at > updated_since)
    if not wanted:
        return []
    return list(session.execute(select(*WATCH_COLUMNS).where(or_(*wanted))))


def job_rows(session: Session, job_ids: Collection[uuid.UUID]) -> list[Any]:
    """Full rows of the jobs table (what `JobPublic` shows), for the jobs that changed."""
    if not job_ids:
        return []
    table = Job.__table__
    return list(session.execute(select(table).where(table.c.id.in_(job_ids))))


def metrics_after(
    session: Session, positions: Mapping[uuid.UUID, int], limit: int
) -> list[MetricRow]:
    """Points past each job's position, oldest first, at most `limit`: per job they are
    always a prefix of what is new, so the position of the last one read is safe to keep."""
    if not positions:
        return []
    columns = (Metric.job_id, Metric.seq, Metric.step, Metric.name, Metric.value)
    query = _past_positions(session, select(*columns), Metric.job_id, Metric.seq, positions)
    query = query.order_by(Metric.seq, Metric.job_id).limit(limit)
    return [
        MetricRow(job_id, seq or 0, step, name, value)
        for job_id, seq, step, name, value in session.execute(query)
    ]


def recent_metrics(session: Session, job_id: uuid.UUID, limit: int) -> list[MetricRow]:
    """The job's last `limit` points by position, oldest first (a late client's window)."""
    columns = (Metric.job_id, Metric.seq, Metric.step, Metric.name, Metric.value)
    query = select(*columns).where(Metric.job_id == job_id).order_by(Metric.seq.desc())
    rows = session.execute(query.limit(limit)).all()
    return [
        MetricRow(job_id, seq or 0, step, name, value)
        for job_id, seq, step, name, value in reversed(rows)
    ]


def events_after(
    session: Session, positions: Mapping[uuid.UUID, int], limit: int
) -> Sequence[JobEvent]:
    """Events past each job's position, oldest first, at most `limit` (a prefix per job)."""
    if not positions:
        return []
    query = _past_positions(session, select(JobEvent), JobEvent.job_id, JobEvent.id, positions)
    return list(session.scalars(query.order_by(JobEvent.id).limit(limit)))


def _past_positions(
    session: Session,
    query: AnySelect,
    job_id: InstrumentedAttribute[uuid.UUID],
    position: InstrumentedAttribute[Any],
    positions: Mapping[uuid.UUID, int],
) -> AnySelect:
    """`query` kept to the rows past each job's own position.

    PostgreSQL joins two arrays (one statement of fixed shape, whatever the number of jobs:
    built once and cached); SQLite, whose few embedded clients make it cheap enough, gets
    one `(job = ? AND position > ?)` term per job."""
    if session.get_bind().dialect.name != "postgresql":
        terms = (and_(job_id == j, position > n) for j, n in positions.items())
        return query.where(or_(false(), *terms))
    watched = (
        func.unnest(
            cast(bindparam("job_ids", list(positions)), postgresql.ARRAY(Uuid)),
            cast(bindparam("after", list(positions.values())), postgresql.ARRAY(BigInteger)),
        )
        .table_valued("job_id", "after")
        .render_derived(with_types=False)
    )
    return query.join(watched, and_(job_id == watched.c.job_id, position > watched.c.after))
