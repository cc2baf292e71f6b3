"""jobs carry a list of tags; the dashboard's filters are indexed

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-22 14:30:00.000000

A job's label, when it reads as a tag, becomes its first tag, so jobs submitted before
tags existed are found by the tag filter too (the label itself is kept as it was).
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The same rule as `archsearch.schemas.jobs.TAG_PATTERN` (a migration never imports the app).
TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/+-]{0,63}$")


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tags", sa.JSON(), server_default="[]", nullable=False))
        batch_op.create_index("ix_jobs_team_id_created_at", ["team_id", "created_at"])
        batch_op.create_index("ix_jobs_method_created_at", ["method", "created_at"])
    op.create_table(
        "job_tags",
        sa.Column("tag", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_tags_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("tag", "job_id", name=op.f("pk_job_tags")),
    )
    with op.batch_alter_table("job_tags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_tags_job_id"), ["job_id"], unique=False)
    _tags_from_labels()


def _tags_from_labels() -> None:
    jobs = sa.table(
        "jobs", sa.column("id", sa.Uuid()), sa.column("label"), sa.column("tags", sa.JSON())
    )
    job_tags = sa.table("job_tags", sa.column("tag"), sa.column("job_id", sa.Uuid()))
    connection = op.get_bind()
    rows = connection.execute(sa.select(jobs.c.id, jobs.c.label).where(jobs.c.label.is_not(None)))
    tagged = [(job_id, label) for job_id, label in rows if TAG.match(label)]
    for job_id, label in tagged:
        connection.execute(jobs.update().where(jobs.c.id == job_id).values(tags=[label]))
    if tagged:
        connection.execute(job_tags.insert(), [{"tag": t, "job_id": j} for j, t in tagged])


def downgrade() -> None:
    with op.batch_alter_table("job_tags", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_tags_job_id"))
    op.drop_table("job_tags")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_method_created_at")
        batch_op.drop_index("ix_jobs_team_id_created_at")
        batch_op.drop_column("tags")
