"""studies, and the jobs that belong to one

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 14:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "studies",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("team_id", sa.Uuid(), nullable=True),
        sa.Column("owner_id", sa.Uuid(), nullable=True),
        sa.Column("dataset", sa.JSON(), nullable=False),
        sa.Column("base_spec", sa.JSON(), nullable=False),
        sa.Column("budget", sa.JSON(), nullable=True),
        sa.Column("seeds", sa.JSON(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("sampler", sa.String(length=16), nullable=True),
        sa.Column("n_trials", sa.Integer(), nullable=True),
        sa.Column("parallel", sa.Integer(), nullable=True),
        sa.Column("trials_asked", sa.Integer(), server_default="0", nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("artifacts_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_studies_owner_id_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_studies_team_id_teams"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_studies")),
    )
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_studies_team_id"), ["team_id"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("study_id", sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column("study_arm", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("study_trial", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_study_id"), ["study_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_jobs_study_id_studies"),
            "studies",
            ["study_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_jobs_study_id_studies"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_jobs_study_id"))
        batch_op.drop_column("study_trial")
        batch_op.drop_column("study_arm")
        batch_op.drop_column("study_id")

    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_studies_team_id"))
    op.drop_table("studies")
