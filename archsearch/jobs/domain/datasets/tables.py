"""The `datasets` table: one row per uploaded dataset, with the statistics jobs need.

Jobs refer to a dataset inside their JSON spec (`dataset.id`), not by a foreign key: a
finished job keeps its spec after its dataset is deleted.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from archsearch.jobs.domain.base import Base, Timestamp, utcnow


class UploadedDataset(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # ds-<16 hex of content+options>
    name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(16))  # npz | csv | idx | images
    kind: Mapped[str] = mapped_column(String(16))  # images (N, C, H, W) | features (N, F)
    upload_sha256: Mapped[str] = mapped_column(String(64))
    upload_size: Mapped[int] = mapped_column(BigInteger)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    input_shape: Mapped[list[int]] = mapped_column(JSON)
    num_classes: Mapped[int] = mapped_column(Integer)
    class_names: Mapped[list[str]] = mapped_column(JSON)
    train_size: Mapped[int] = mapped_column(Integer)
    test_size: Mapped[int] = mapped_column(Integer)
    class_counts: Mapped[dict[str, list[int]]] = mapped_column(JSON)
    mean: Mapped[list[float]] = mapped_column(JSON)
    std: Mapped[list[float]] = mapped_column(JSON)
    split: Mapped[dict[str, Any]] = mapped_column(JSON)
    stored_sha256: Mapped[str] = mapped_column(String(64))
    stored_size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    # Team mode: the team that uploaded it; only that team (and admins) see or use it.
    team_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), index=True
    )

    __table_args__ = (Index("ix_datasets_created_at", "created_at"),)
