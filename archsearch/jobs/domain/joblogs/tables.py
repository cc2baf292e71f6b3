"""The `job_log_lines` table: one row per log record of a running job."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from archsearch.jobs.domain.base import Base, BigId, Timestamp, utcnow


class JobLogLine(Base):
    """A log record of a job's run; `id` orders the lines and is the follow cursor."""

    __tablename__ = "job_log_lines"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    level: Mapped[str] = mapped_column(String(10))  # INFO, WARNING, ERROR, ...
    logger: Mapped[str] = mapped_column(String(200))  # where it came from
    message: Mapped[str] = mapped_column(Text)
