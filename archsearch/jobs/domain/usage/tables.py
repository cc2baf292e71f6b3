"""`job_attempts`: one row per run of a job (each claim, including one later handed back
on a graceful stop), from its claim to its end.

`seconds` is kept up to date while the run goes on (each lease renewal moves `last_seen_at`
and the seconds with it), so a sum over the table is a number that only grows, and a run
whose worker was killed ends at its last renewal, not when its loss was noticed (the
reaper finds it by its expired lease; the time between is not charged).

One meaning of "attempts" everywhere (the job's `attempts`, `max_attempts`, the usage
report): the runs that counted against `max_attempts`. A run handed back (a graceful stop, a
preemption, an object-store outage) gives its attempt back (`given_back`): it is still a
run here, and its device time is still charged. A run's charge is its `seconds` times the
`device_share` it held: 1/K on a worker with K slots on one device. `figures` are what the
run used of its device (`jobs/runtime/figures.py`), written when its method returns or
raises; null for a run whose process was killed, or that ended before its method started.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Uuid, false
from sqlalchemy.orm import Mapped, mapped_column

from archsearch.jobs.domain.base import Base, Timestamp


class JobAttempt(Base):
    __tablename__ = "job_attempts"

    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Copied from the job, so a usage report groups without a join. No foreign keys: the
    # claim copies them from the job it holds locked, and a key check would lock the team's
    # row in every concurrent claim (migration 0018); deleting a user or team clears them
    # here by a trigger instead.
    team_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True)
    owner_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    method: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(8))  # cpu | cuda: what the worker offered
    worker: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[datetime] = mapped_column(Timestamp)
    last_seen_at: Mapped[datetime] = mapped_column(Timestamp)
    ended_at: Mapped[datetime | None] = mapped_column(Timestamp)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)  # held, claim to end
    # The share of the device the run held (1/slots of its worker): what `seconds` is charged.
    device_share: Mapped[float] = mapped_column(Float, default=1.0, server_default="1")
    # Handed back without costing an attempt: a run, but not one of the job's `attempts`.
    given_back: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    figures: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    __table_args__ = (
        Index("ix_job_attempts_started_at", "started_at"),
        # A team's weekly device-hours: a range of its attempts seen within the week.
        Index("ix_job_attempts_team_id_last_seen_at", "team_id", "last_seen_at", "started_at"),
    )
