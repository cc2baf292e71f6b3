"""The `studies` table: one row per study; its jobs point back at it (`jobs.study_id`).

An adaptive study's sampler state lives in Optuna's own tables in the same database; this
row holds what the durable driver needs besides (how many trials it asked, whether it is
cancelled), so any process can advance it after a restart.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Enum, ForeignKey, Integer, String, Uuid, false
from sqlalchemy.orm import Mapped, mapped_column

from archsearch.jobs.domain.base import Base, Timestamp, utcnow
from archsearch.schemas.studies import StudyStatus


class Study(Base):
    __tablename__ = "studies"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(200))
    team_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("teams.id", ondelete="SET NULL"), index=True
    )
    owner_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    dataset: Mapped[dict[str, Any]] = mapped_column(JSON)
    base_spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    # {"steps": N} or {"epochs": E}, with "steps" resolved at submit time; null: no budget.
    budget: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    seeds: Mapped[list[int]] = mapped_column(JSON)
    # The request as given: arms, grid, preset, search space, objectives.
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    sampler: Mapped[str | None] = mapped_column(String(16))  # null: fixed; grid|random|tpe|nsga2
    n_trials: Mapped[int | None] = mapped_column(Integer)
    parallel: Mapped[int | None] = mapped_column(Integer)
    trials_asked: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The column the migrations made: a VARCHAR(16) of the status's value, no CHECK constraint.
    status: Mapped[StudyStatus] = mapped_column(
        Enum(
            StudyStatus,
            native_enum=False,
            length=16,
            create_constraint=False,
            values_callable=lambda statuses: [s.value for s in statuses],
        ),
        default=StudyStatus.running,
    )
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # When the worker last built results.csv, pareto.png, ...; null: not built yet.
    artifacts_at: Mapped[datetime | None] = mapped_column(Timestamp)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)
