"""jobs keep their log lines

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_log_lines",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("level", sa.String(length=10), nullable=False),
        sa.Column("logger", sa.String(length=200), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_log_lines_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_log_lines")),
    )
    with op.batch_alter_table("job_log_lines", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_log_lines_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("job_log_lines", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_log_lines_job_id"))
    op.drop_table("job_log_lines")
