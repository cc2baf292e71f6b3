"""datasets belong to teams

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 03:15:50.410298
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("team_id", sa.Uuid(), nullable=True))
        batch_op.create_index(batch_op.f("ix_datasets_team_id"), ["team_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_datasets_team_id_teams"),
            "teams",
            ["team_id"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_datasets_team_id_teams"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_datasets_team_id"))
        batch_op.drop_column("team_id")
