"""The model registry's tables: models, their immutable versions and files, and aliases.

A version points at its job's artifact objects (same keys, sizes and sha256) rather than
copying bytes; the job row cannot be deleted while a version refers to it (the foreign key
restricts), so the files stay downloadable whatever happens to the job's own listing.
Alias changes are appended to `model_alias_events`, never rewritten: who moved which alias
from which version to which, and when.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.orm import Mapped, mapped_column

from archsearch.jobs.domain.base import Base, BigId, Timestamp, utcnow


class RegisteredModel(Base):
    """A model name of one team; `team_key` is the team's hex id, or "" in embedded mode,
    so the uniqueness of (team, name) holds without a nullable column in the key."""

    __tablename__ = "registered_models"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    team_key: Mapped[str] = mapped_column(String(32))
    team_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    # The last version number handed out; the next promotion takes it + 1 under a row lock.
    latest_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)

    __table_args__ = (UniqueConstraint("team_key", "name", name="uq_registered_models_team_name"),)


class ModelVersion(Base):
    __tablename__ = "model_versions"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    model_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), index=True
    )
    version: Mapped[int] = mapped_column(Integer)
    # RESTRICT: a job that a version was promoted from cannot be deleted under it.
    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="RESTRICT"), index=True
    )
    description: Mapped[str] = mapped_column(Text, default="")
    # What the version was made from, frozen at promotion: method, spec, dataset reference
    # and its sha256, the archsearch version, the metrics and the model card.
    lineage: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    # Archived: kept (files downloadable, lineage intact) but folded away and no alias target.
    archived_at: Mapped[datetime | None] = mapped_column(Timestamp)
    archived_by: Mapped[str | None] = mapped_column(String(200))

    __table_args__ = (
        UniqueConstraint("model_id", "version", name="uq_model_versions_model_version"),
    )


class ModelVersionFile(Base):
    """One downloadable file of a version: the job artifact's object key and its digest."""

    __tablename__ = "model_version_files"

    version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("model_versions.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    object_key: Mapped[str] = mapped_column(String(400))
    media_type: Mapped[str] = mapped_column(String(100))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))


class ModelAlias(Base):
    __tablename__ = "model_aliases"

    model_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), primary_key=True
    )
    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    updated_by: Mapped[str] = mapped_column(String(200))
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class ModelAliasEvent(Base):
    """One alias change: set (to_version), moved (from and to) or removed (to_version null)."""

    __tablename__ = "model_alias_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    model_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), index=True
    )
    alias: Mapped[str] = mapped_column(String(64))
    from_version: Mapped[int | None] = mapped_column(Integer)
    to_version: Mapped[int | None] = mapped_column(Integer)
    actor: Mapped[str] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
