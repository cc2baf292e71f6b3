"""job_attempts: the share of the device a run held (slots), and runs given back

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28 16:00:00.000000

A worker may run several jobs at once on one device (`ARCHSEARCH_WORKER_SLOTS`): each run
records the share of the device it held (1/slots), and its device time is charged that
share. A run handed back without costing an attempt (a graceful stop, a preemption, an
object-store outage) says so (`given_back`), so the usage report's `attempts` means what a
job's `attempts` means: the runs that counted against `max_attempts`. Existing rows held
the whole device; which of them were given back is not known, so none is marked.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "job_attempts",
        sa.Column("device_share", sa.Float(), server_default="1", nullable=False),
    )
    op.add_column(
        "job_attempts",
        sa.Column("given_back", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+): a batch copy would trip the table's triggers.
    op.drop_column("job_attempts", "given_back")
    op.drop_column("job_attempts", "device_share")
