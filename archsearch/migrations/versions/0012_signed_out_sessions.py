"""signed_out_sessions: dashboard sessions signed out before their cookie expired

Revision ID: 0012
Revises: 0015
Create Date: 2026-11-25 23:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "signed_out_sessions",
        sa.Column("session_digest", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_digest", name=op.f("pk_signed_out_sessions")),
    )
    op.create_index(
        op.f("ix_signed_out_sessions_expires_at"),
        "signed_out_sessions",
        ["expires_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_signed_out_sessions_expires_at"), table_name="signed_out_sessions")
    op.drop_table("signed_out_sessions")
