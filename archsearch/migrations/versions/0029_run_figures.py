"""each run's device figures: `job_attempts.figures`

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28 20:40:00.000000

What a run used of its device (device name, peak memory, utilisation:
`jobs/runtime/figures.py`) was kept only in the job's latest metrics, so the usage API could
show it for the run that ended a succeeded job and for no other. Each run now keeps its own
on its row. Rows from before stay null (the usage API still reads a succeeded job's last run
from its metrics).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("job_attempts", sa.Column("figures", sa.JSON()))


def downgrade() -> None:
    with op.batch_alter_table("job_attempts") as batch:
        batch.drop_column("figures")
