"""one victim per urgent job: `jobs.victim_asked_until` keeps a waiting job from asking a
second running job to stop while its first victim may still be on its way

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 16:00:00.000000

A victim whose worker was SIGKILLed during its hand-back used to leave its urgent job
without a worker on its way (the dead worker drops out of the live workers before the
victim's lease expires), and the next sweep asked a second victim for the same urgent job.
The waiting job now remembers until when its victim may still be coming
(`jobs/domain/jobs/preemption.py`).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("victim_asked_until", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("jobs", "victim_asked_until")
