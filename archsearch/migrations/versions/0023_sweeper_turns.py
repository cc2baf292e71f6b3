"""one worker at a time runs the fleet's sweeps: `sweeper_turns` names it and until when

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 13:40:00.000000

Every worker's tick used to run every sweep (expired leases, quota holds, preemption,
wake-ups, studies, orphans): a thousand workers ran them a thousand times each interval.
A worker now runs them only while it holds the sweeps' turn, one row it takes when the row
has expired (`jobs/domain/jobs/sweeper.py`): one short statement per tick per worker, and
the sweeps once per interval for the whole fleet. A row, not a session advisory lock,
because the workers' connections may go through a transaction-pooling PgBouncer.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sweeper_turns",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_sweeper_turns")),
    )


def downgrade() -> None:
    op.drop_table("sweeper_turns")
