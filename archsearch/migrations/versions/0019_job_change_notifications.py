"""notify the changed job's id on the `job_changed` channel when a job row that was not
queued changes (or a user's name, shown with their jobs, changes: then every job), for the
API's answers kept in memory (api/job_answers.py); PostgreSQL only

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26 02:40:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# NOTIFY is transactional: delivered at commit, once per distinct payload per transaction.
# A job that was queued before the change has no kept answer (queued answers are never
# kept), so claims and queued jobs' edits notify nothing: a notifying commit takes
# PostgreSQL's notification lock, which would serialise concurrent claims.
UPGRADE = """
CREATE FUNCTION notify_job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('job_changed', COALESCE(NEW.id, OLD.id)::text);
    RETURN NULL;
END $$;
CREATE FUNCTION notify_every_job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('job_changed', '*');
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_notify_changed AFTER UPDATE OR DELETE ON jobs
    FOR EACH ROW WHEN (OLD.status <> 'queued') EXECUTE FUNCTION notify_job_changed();
CREATE TRIGGER users_notify_jobs_changed AFTER UPDATE OF name OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION notify_every_job_changed();
"""
DOWNGRADE = """
DROP TRIGGER users_notify_jobs_changed ON users;
DROP TRIGGER jobs_notify_changed ON jobs;
DROP FUNCTION notify_every_job_changed();
DROP FUNCTION notify_job_changed();
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(UPGRADE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(DOWNGRADE)
