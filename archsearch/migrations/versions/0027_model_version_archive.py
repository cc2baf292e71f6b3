"""a model version can be archived: `archived_at` and `archived_by` on `model_versions`

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 16:00:00.000000

Versions are immutable and their files stay downloadable (a deployment may still fetch one by
number), so archiving removes nothing: it marks a version as not to be used, which the pages
and `models show` fold away and which an alias may no longer point at.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "model_versions", sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("model_versions", sa.Column("archived_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("archived_by")
        batch.drop_column("archived_at")
