"""charts drawn on first download: `artifacts.chart`, `size` and `sha256` null until drawn

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-29 10:20:00.000000

A job's charts (`curves.png`, `mask-logits.png`, `spectrum.png`) were drawn by the worker at
the job's end, a fifth of a short prune job's fixed work, for figures most jobs (a study's
trials) never have opened. The worker now keeps the data a chart is drawn from on its
artifact row (`chart`, JSON) and the API draws the PNG on its first download, then stores it
and fills in `size` and `sha256` (null until then). Rows from before all hold their file.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.add_column(sa.Column("chart", sa.JSON()))
        batch.alter_column("size", existing_type=sa.BigInteger(), nullable=True)
        batch.alter_column("sha256", existing_type=sa.String(64), nullable=True)


def downgrade() -> None:
    # A chart never downloaded has no file to keep a row for: drop its row with it.
    op.execute("DELETE FROM artifacts WHERE sha256 IS NULL")
    with op.batch_alter_table("artifacts") as batch:
        batch.alter_column("sha256", existing_type=sa.String(64), nullable=False)
        batch.alter_column("size", existing_type=sa.BigInteger(), nullable=False)
        batch.drop_column("chart")
