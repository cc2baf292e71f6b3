"""one scheduling rule from the claim to the autoscaler, and a scheduler tick whose work does
not grow with the queue or the fleet

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 13:00:00.000000

`archsearch_claimable(kind, ...)` (PostgreSQL only) counts the jobs workers of one device
kind may claim now plus those running on it; each KEDA ScaledObject's query is one call of
it. Its text is rendered by `jobs/domain/jobs/claimable.py` from the claim's own pieces; a
test checks that the function installed here is the one that module renders now, so a
change to the rule comes with a migration that installs it again.

The indexes: the presence update's prune of dead workers (`heartbeat_at`), the tick's
probe for devices whose jobs waited long and its scan for expired leases (partial indexes
of queued and running jobs), and a team's attempts seen in the last week (its weekly
device-hours summed in one aggregate).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from archsearch.jobs.domain.jobs import claimable

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_workers_heartbeat_at", "workers", ["heartbeat_at"])
    op.create_index(
        "ix_jobs_queued_device_created_at",
        "jobs",
        ["device", "created_at"],
        postgresql_where=sa.text("status = 'queued'"),
        sqlite_where=sa.text("status = 'queued'"),
    )
    op.create_index(
        "ix_jobs_running_lease_expires_at",
        "jobs",
        ["lease_expires_at"],
        postgresql_where=sa.text("status = 'running'"),
        sqlite_where=sa.text("status = 'running'"),
    )
    op.create_index(
        "ix_job_attempts_team_id_last_seen_at",
        "job_attempts",
        ["team_id", "last_seen_at", "started_at"],
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(claimable.install_sql())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(claimable.drop_sql())
    op.drop_index("ix_job_attempts_team_id_last_seen_at", table_name="job_attempts")
    op.drop_index("ix_jobs_running_lease_expires_at", table_name="jobs")
    op.drop_index("ix_jobs_queued_device_created_at", table_name="jobs")
    op.drop_index("ix_workers_heartbeat_at", table_name="workers")
