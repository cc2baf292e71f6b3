"""Teams, users and API tokens. Tokens are stored only as their SHA-256: a token is 256
random bits, so a fast hash is enough (no password-style stretching needed)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from archsearch.jobs.domain.base import Base, Timestamp, utcnow


class Team(Base):
    __tablename__ = "teams"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    max_running: Mapped[int | None] = mapped_column(Integer)  # None: the server default
    # Device-hours the team may use per rolling 7 days (None: no limit). While they are used
    # up, the scheduler's tick sets `usage_held_reason` and no queued job of the team starts.
    weekly_device_hours: Mapped[float | None] = mapped_column(Float)
    usage_held_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class User(Base):
    __tablename__ = "users"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    team_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    max_running: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(12))  # shown in listings to tell tokens apart
    scope: Mapped[str] = mapped_column(String(8))  # read | submit | admin
    expires_at: Mapped[datetime | None] = mapped_column(Timestamp)
    revoked_at: Mapped[datetime | None] = mapped_column(Timestamp)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class SignedOutSession(Base):
    """A dashboard session signed out before its cookie expired: the cookie is signed, not
    stored, so signing out is remembered here, by a digest of the session's random id, until
    the cookie could no longer be accepted anyway (`expires_at`)."""

    __tablename__ = "signed_out_sessions"

    session_digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(Timestamp, index=True)
