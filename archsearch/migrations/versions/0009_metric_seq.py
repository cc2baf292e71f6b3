"""metric rows carry a sequence number that live streams read on from

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-22 14:10:00.000000

`metrics.seq` rises, per job, whenever a point is inserted or its value changes, and is set
by the database itself, so the worker's upsert (`repository.record_metrics`) stays as it is:
a point that a resumed job reports again with the same value keeps its number (a stream
never sends it twice), and a point whose value changes (a later phase redoing a step) gets
a new one. PostgreSQL draws from one sequence; SQLite has none and takes the job's largest
number plus one (its writers are serialised, and the index below makes that a seek).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

POSTGRES_UP = [
    "CREATE SEQUENCE metrics_seq AS BIGINT",
    "ALTER TABLE metrics ALTER COLUMN seq SET DEFAULT nextval('metrics_seq')",
    "ALTER SEQUENCE metrics_seq OWNED BY metrics.seq",
    "UPDATE metrics SET seq = nextval('metrics_seq')",
    """CREATE FUNCTION metrics_renumber() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.seq := nextval('metrics_seq');
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER metrics_value_changed BEFORE UPDATE OF value ON metrics
    FOR EACH ROW WHEN (OLD.value IS DISTINCT FROM NEW.value)
    EXECUTE FUNCTION metrics_renumber()""",
]
POSTGRES_DOWN = [
    "DROP TRIGGER metrics_value_changed ON metrics",
    "DROP FUNCTION metrics_renumber()",
]

_NEXT_FOR_JOB = "(SELECT coalesce(max(seq), 0) + 1 FROM metrics WHERE job_id = NEW.job_id)"
SQLITE_UP = [
    "UPDATE metrics SET seq = rowid",
    f"""CREATE TRIGGER metrics_inserted AFTER INSERT ON metrics BEGIN
    UPDATE metrics SET seq = {_NEXT_FOR_JOB} WHERE rowid = NEW.rowid; END""",
    f"""CREATE TRIGGER metrics_value_changed AFTER UPDATE OF value ON metrics
    WHEN OLD.value IS NOT NEW.value BEGIN
    UPDATE metrics SET seq = {_NEXT_FOR_JOB} WHERE rowid = NEW.rowid; END""",
]
SQLITE_DOWN = ["DROP TRIGGER metrics_inserted", "DROP TRIGGER metrics_value_changed"]


def upgrade() -> None:
    with op.batch_alter_table("metrics", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seq", sa.BigInteger(), nullable=True))
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_UP if postgres else SQLITE_UP:
        op.execute(statement)
    with op.batch_alter_table("metrics", schema=None) as batch_op:
        batch_op.create_index("ix_metrics_job_id_seq", ["job_id", "seq"], unique=False)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_DOWN if postgres else SQLITE_DOWN:
        op.execute(statement)
    with op.batch_alter_table("metrics", schema=None) as batch_op:
        batch_op.drop_index("ix_metrics_job_id_seq")
        batch_op.drop_column("seq")  # drops the sequence it owns on PostgreSQL
