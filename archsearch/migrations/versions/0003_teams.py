"""teams, users, tokens, workers, scheduling

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 02:56:15.789539
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("name", name=op.f("uq_teams_name")),
    )
    op.create_table(
        "workers",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("device", sa.String(length=8), nullable=False),
        sa.Column("device_index", sa.Integer(), nullable=True),
        sa.Column("device_name", sa.String(length=200), nullable=True),
        sa.Column("gpu_memory_gb", sa.Float(), nullable=True),
        sa.Column("current_job_id", sa.Uuid(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_workers")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_users_team_id_teams"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_users_team_id"), ["team_id"], unique=False)

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=12), nullable=False),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_api_tokens_token_sha256")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_user_id"), ["user_id"], unique=False)

    with op.batch_alter_table("job_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("actor", sa.String(length=200), nullable=True))

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner_id", sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column("team_id", sa.Uuid(), nullable=True))
        # Server defaults let existing rows take the new non-null columns.
        batch_op.add_column(sa.Column("priority", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(
            sa.Column("device", sa.String(length=8), server_default="auto", nullable=False)
        )
        batch_op.add_column(sa.Column("min_gpu_memory_gb", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("cancel_requested_by", sa.String(length=200), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_team_id"), ["team_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_jobs_team_id_teams"), "teams", ["team_id"], ["id"], ondelete="SET NULL"
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_jobs_owner_id_users"), "users", ["owner_id"], ["id"], ondelete="SET NULL"
        )

    # Outside the batch: SQLite's table rebuild cannot carry an expression index.
    op.create_index(
        "ix_jobs_queue",
        "jobs",
        [sa.literal_column("priority DESC"), "created_at", "id"],
        unique=False,
        postgresql_where=sa.text("status = 'queued'"),
        sqlite_where=sa.text("status = 'queued'"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_queue", table_name="jobs")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_jobs_owner_id_users"), type_="foreignkey")
        batch_op.drop_constraint(batch_op.f("fk_jobs_team_id_teams"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_jobs_team_id"))
        batch_op.drop_index(batch_op.f("ix_jobs_owner_id"))
        batch_op.drop_column("cancel_requested_by")
        batch_op.drop_column("min_gpu_memory_gb")
        batch_op.drop_column("device")
        batch_op.drop_column("priority")
        batch_op.drop_column("team_id")
        batch_op.drop_column("owner_id")

    with op.batch_alter_table("job_events", schema=None) as batch_op:
        batch_op.drop_column("actor")

    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_user_id"))

    op.drop_table("api_tokens")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_users_team_id"))

    op.drop_table("users")
    op.drop_table("workers")
    op.drop_table("teams")
