"""webhook signing secrets at rest: a sealed column beside the clear one

Adds `webhooks.secret_encrypted` (a Fernet token under ARCHSEARCH_SECRET_KEYS, see
`jobs/platform/secret_keys.py`) and lets the clear `webhooks.secret` be empty.

The data is not moved here, on purpose: sealing needs the key, and a migration that reads
keys would behave differently on the machine that runs `archsearch db upgrade` (often a
one-shot job without the API's secrets) than on the API. Rows made before this revision keep
their clear secret and are still signed with it (the deliverer reads either column); new
webhooks are stored sealed only. `archsearch admin rotate-webhook-secrets`, run once after
the upgrade with the keys set, seals every clear secret and empties its clear column; it is
the same command that re-seals under a new key, and it says how many clear ones it sealed.

Downgrade refuses while a webhook has only a sealed secret: revision 0025's code could not
sign its deliveries.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("secret_encrypted", sa.Text(), nullable=True))
        batch.alter_column("secret", existing_type=sa.String(length=200), nullable=True)


def downgrade() -> None:
    sealed_only = op.get_bind().scalar(
        sa.text("SELECT count(*) FROM webhooks WHERE secret IS NULL")
    )
    if sealed_only:
        raise RuntimeError(
            f"{sealed_only} webhooks keep their signing secret only encrypted; revision 0025 "
            "cannot sign for them: delete them (archsearch webhooks delete) before downgrading"
        )
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("secret", existing_type=sa.String(length=200), nullable=False)
        batch.drop_column("secret_encrypted")
