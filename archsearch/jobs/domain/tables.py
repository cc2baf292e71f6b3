"""The job tables: jobs, their events, metrics and artifacts, and the worker registry.

The accounts, datasets, studies and joblogs rooms keep their own tables; `metadata.py`
gathers them all. The job tables stay at the domain's root, not in `jobs/`, because every
room reads them (a dataset in use, a study's trials, a job's log): a room that imports the
`jobs` room for its table would close a cycle with the `jobs` room's own use of it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from archsearch.jobs.domain.base import Base, BigId, Timestamp, utcnow
from archsearch.schemas.jobs import JobStatus  # defined once, on the wire; the ORM stores it


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    method: Mapped[str] = mapped_column(String(32))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[JobStatus] = mapped_column(
        Enum(
            JobStatus,
            native_enum=False,
            length=16,
            create_constraint=True,
            name="job_status",
            values_callable=lambda statuses: [s.value for s in statuses],
        ),
        default=JobStatus.queued,
    )
    label: Mapped[str | None] = mapped_column(String(200))
    # The job's tags as read with it (no join on the hot read path); `job_tags` holds the
    # same list, one indexed row per tag, for filtering.
    tags: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    step: Mapped[int] = mapped_column(Integer, default=0)
    total_steps: Mapped[int] = mapped_column(Integer, default=0)
    latest_metrics: Mapped[dict[str, float]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    # What a succeeded run wants the user to look at: [{"code": ..., "message": ...}].
    warnings: Mapped[list[dict[str, str]]] = mapped_column(JSON, default=list, server_default="[]")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    cancel_requested_by: Mapped[str | None] = mapped_column(String(200))
    # Priority preemption: the queued job that needs this running job's worker; the worker
    # hands this job back at its next checkpoint (`runtime/lease.py` reads it).
    stop_requested_for: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    # ... and on the waiting job: until when the victim it asked for may still be on its way
    # (handed back, its worker about to claim); no second victim is asked before then.
    victim_asked_until: Mapped[datetime | None] = mapped_column(Timestamp)
    worker: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(Timestamp)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(Timestamp)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)
    # Team mode: who owns the job, and what the scheduler needs to place it.
    owner_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    team_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("teams.id", ondelete="SET NULL"), index=True
    )
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    device: Mapped[str] = mapped_column(
        String(8), default="auto", server_default="auto"
    )  # cpu|cuda|auto
    min_gpu_memory_gb: Mapped[float | None] = mapped_column(Float)
    # A study's job: which study, which arm (label), which Optuna trial (adaptive studies).
    study_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("studies.id", ondelete="SET NULL"), index=True
    )
    study_arm: Mapped[str | None] = mapped_column(String(200))
    study_trial: Mapped[int | None] = mapped_column(Integer)

    events: Mapped[list[JobEvent]] = relationship(
        back_populates="job", order_by="JobEvent.id", cascade="all, delete-orphan"
    )

    __table_args__ = (
        # Newest-first listing and its cursor walk this index, with or without a filter.
        Index("ix_jobs_created_at_id", "created_at", "id"),
        Index("ix_jobs_status_created_at", "status", "created_at"),
        # The dashboard's filters (a team's page, a method) stay index walks at 10,000 jobs.
        Index("ix_jobs_team_id_created_at", "team_id", "created_at"),
        Index("ix_jobs_method_created_at", "method", "created_at"),
        # The scheduler walks queued jobs in this order; a partial index keeps a claim
        # independent of how many jobs wait (or ever ran).
        Index(
            "ix_jobs_queue",
            priority.desc(),
            created_at,
            id,
            postgresql_where=text("status = 'queued'"),
            sqlite_where=text("status = 'queued'"),
        ),
        # The scheduler's tick asks whether a device's jobs have waited long (one probe per
        # device kind) and which leases expired: each reads only the rows it answers with.
        Index(
            "ix_jobs_queued_device_created_at",
            "device",
            "created_at",
            postgresql_where=text("status = 'queued'"),
            sqlite_where=text("status = 'queued'"),
        ),
        Index(
            "ix_jobs_running_lease_expires_at",
            "lease_expires_at",
            postgresql_where=text("status = 'running'"),
            sqlite_where=text("status = 'running'"),
        ),
    )


class JobEvent(Base):
    """Every status transition of a job, with time and reason."""

    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    from_status: Mapped[str | None] = mapped_column(String(16))
    to_status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str | None] = mapped_column(String(200))  # user, worker or "system"
    at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)

    job: Mapped[Job] = relationship(back_populates="events")


class JobTag(Base):
    """One tag of one job: `GET /v1/jobs?tag=x` walks the (tag, job_id) key."""

    __tablename__ = "job_tags"

    tag: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class Metric(Base):
    """One value of one metric at one step. A resumed job overwrites the steps it redoes."""

    __tablename__ = "metrics"

    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[float] = mapped_column(Float)
    # Rises (per job) whenever a point is written or its value changes; an unchanged point
    # that a resumed job reports again keeps it. Set by the database (migration 0009):
    # live streams read on from it (`streams_repository`).
    seq: Mapped[int | None] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_metrics_job_id_seq", "job_id", "seq"),)


class Artifact(Base):
    """A stored result file of a job. The bytes live in the artifact store.

    A chart (`core.charts`) is drawn on its first download: until then its row holds the
    data it is drawn from (`chart`) and no file, `size` and `sha256` are null."""

    __tablename__ = "artifacts"

    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    media_type: Mapped[str] = mapped_column(String(100))
    size: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64))
    chart: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class WorkerRecord(Base):
    """A worker process and the device it offers; it heartbeats while alive."""

    __tablename__ = "workers"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    host: Mapped[str] = mapped_column(String(200))
    device: Mapped[str] = mapped_column(String(8))  # cpu | cuda
    device_index: Mapped[int | None] = mapped_column(Integer)
    device_name: Mapped[str | None] = mapped_column(String(200))
    gpu_memory_gb: Mapped[float | None] = mapped_column(Float)
    current_job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    started_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)

    # Every presence update prunes the rows of workers silent for an hour, and the scheduler
    # reads the live ones: both a range of this index, not the whole registry.
    __table_args__ = (Index("ix_workers_heartbeat_at", "heartbeat_at"),)


class SweeperTurn(Base):
    """Which worker runs the fleet's sweeps (reaping, quota holds, preemption, wake-ups,
    studies, orphans) until when: one row per sweep, taken by whoever finds it expired
    (`jobs/sweeper.py`), so the sweeps cost the same whatever the number of workers."""

    __tablename__ = "sweeper_turns"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(Timestamp)


class RunningCount(Base):
    """Running jobs of one user or team: the sum of its shards' `running`. On PostgreSQL a
    trigger on `jobs` keeps it, in the transaction that moves a job into or out of
    `running` (migration 0011), so a claim reads a few rows per user and team instead of
    every running job (SQLite, one process, counts the jobs). A team's count is split over
    16 shards, so concurrent claims of its members lock different rows; a user's is one row
    (migration 0018), since every claim reads the counts of all the owners it ranks."""

    __tablename__ = "running_counts"

    kind: Mapped[str] = mapped_column(String(4), primary_key=True)  # user | team
    subject_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    running: Mapped[int] = mapped_column(Integer, default=0)
