"""A study trial stopped by its pruner ends as its own state: the job status `pruned`.

`jobs.status` is a VARCHAR(16) with a CHECK constraint (`ck_jobs_job_status`), not a native
PostgreSQL enum, so no `ALTER TYPE ... ADD VALUE` (which may not run inside a transaction
block before PostgreSQL 12) is needed: the constraint is dropped and made again with the new
value, inside Alembic's transaction. SQLite rebuilds the table (batch mode) to do the same.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28 16:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = ("queued", "running", "succeeded", "failed", "cancelled")
AFTER = (*BEFORE, "pruned")


def _check(values: tuple[str, ...]) -> str:
    return "status IN ({})".format(", ".join(f"'{value}'" for value in values))


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_jobs_job_status"), type_="check")
        batch_op.create_check_constraint(op.f("ck_jobs_job_status"), _check(AFTER))


def downgrade() -> None:
    # A pruned job had stopped early without failing: the closest older state is `failed`.
    op.execute("UPDATE jobs SET status = 'failed' WHERE status = 'pruned'")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_jobs_job_status"), type_="check")
        batch_op.create_check_constraint(op.f("ck_jobs_job_status"), _check(BEFORE))
