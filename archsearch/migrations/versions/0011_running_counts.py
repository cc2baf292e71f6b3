"""running jobs per user and team, kept by the database

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-25 20:10:00.000000

A claim needs each user's and team's running jobs (quotas, fair share). Counting them read
every running row on every claim; `running_counts` holds them per user and team, moved by a
trigger on `jobs` in the same transaction as the job's own change (a claim, an end, a
requeue, a delete), so it cannot drift from the jobs. Each count is split over 16 shards
(picked by the job's id, so a job's end returns to the shard its start counted in): a row
stays locked until its transaction commits, and one row per user would serialise every
claim of a user's sweep; a reader sums at most 16 rows. PostgreSQL only: SQLite serves one
process with few jobs, and the scheduler counts there.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SHARDS = 16
_SHARD = "(hashtext({row}.id::text) & " + str(SHARDS - 1) + ")"
_BUMP = """
    IF {row}.owner_id IS NOT NULL THEN
        INSERT INTO running_counts AS c (kind, subject_id, shard, running)
        VALUES ('user', {row}.owner_id, {shard}, {d})
        ON CONFLICT (kind, subject_id, shard) DO UPDATE SET running = c.running + {d};
    END IF;
    IF {row}.team_id IS NOT NULL THEN
        INSERT INTO running_counts AS c (kind, subject_id, shard, running)
        VALUES ('team', {row}.team_id, {shard}, {d})
        ON CONFLICT (kind, subject_id, shard) DO UPDATE SET running = c.running + {d};
    END IF;"""

_ENDED = _BUMP.format(row="OLD", d="-1", shard=_SHARD.format(row="OLD"))
_STARTED = _BUMP.format(row="NEW", d="1", shard=_SHARD.format(row="NEW"))

POSTGRES_UP = [
    """INSERT INTO running_counts (kind, subject_id, shard, running)
    SELECT 'user', owner_id, 0, count(*) FROM jobs
    WHERE status = 'running' AND owner_id IS NOT NULL GROUP BY owner_id
    UNION ALL
    SELECT 'team', team_id, 0, count(*) FROM jobs
    WHERE status = 'running' AND team_id IS NOT NULL GROUP BY team_id""",
    f"""CREATE FUNCTION jobs_count_running() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- The user, then the team: every writer takes the two rows in this order.
        IF TG_OP <> 'INSERT' AND OLD.status = 'running'
           AND (TG_OP = 'DELETE' OR NEW.status <> 'running') THEN {_ENDED}
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.status = 'running'
           AND (TG_OP = 'INSERT' OR OLD.status <> 'running') THEN {_STARTED}
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER jobs_count_running AFTER INSERT OR DELETE OR UPDATE OF status ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_count_running()""",
]
POSTGRES_DOWN = [
    "DROP TRIGGER jobs_count_running ON jobs",
    "DROP FUNCTION jobs_count_running()",
]


def upgrade() -> None:
    op.create_table(
        "running_counts",
        sa.Column("kind", sa.String(length=4), nullable=False),
        sa.Column("subject_id", sa.Uuid(), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "subject_id", "shard", name=op.f("pk_running_counts")),
    )
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRES_UP:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRES_DOWN:
            op.execute(statement)
    op.drop_table("running_counts")
