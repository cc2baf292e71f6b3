"""priority preemption and a team's weekly device-hours quota: a running job's stop request
(the job that needs its worker), a team's quota in device-hours per rolling 7 days and, while
it is used up, the reason its queued jobs are held

Revision ID: 0017
Revises: 0012
Create Date: 2026-11-25 23:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("stop_requested_for", sa.Uuid(), nullable=True))
    op.add_column("teams", sa.Column("weekly_device_hours", sa.Float(), nullable=True))
    op.add_column("teams", sa.Column("usage_held_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("teams", "usage_held_reason")
    op.drop_column("teams", "weekly_device_hours")
    op.drop_column("jobs", "stop_requested_for")
