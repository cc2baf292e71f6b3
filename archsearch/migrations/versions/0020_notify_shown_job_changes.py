"""a job's change notifies `job_changed` only when a column GET /v1/jobs/{id} shows changed:
a lease renewal (which no longer moves `updated_at`) notifies nothing, progress still does;
PostgreSQL only

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26 06:20:00.000000

Every running job renews its lease every few seconds; under 0019 each renewal notified the
job's id to every API process, which forgot a kept answer that had not changed, and each
notifying commit took PostgreSQL's notification lock. The trigger now compares the columns
the answer shows (`JobPublic`'s fields that are columns of `jobs`; the owner's name has its
own trigger). A test updates each such column and expects a notification, so a column added
to the answer without being added here fails it. JSON columns compare as text: json has no
equality operator, and a rewrite that only changes spacing notifies, which is merely safe.
Jobs that were queued still notify nothing (no answer of theirs is kept), so claims stay off
the notification lock; deletes notify as before.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SHOWN_COLUMNS = (
    "id", "method", "status", "label", "tags::text", "spec::text", "progress", "step",
    "total_steps", "latest_metrics::text", "error", "warnings::text", "attempts",
    "cancel_requested", "worker", "created_at", "started_at", "finished_at", "updated_at",
    "owner_id", "team_id", "priority", "device", "study_id", "study_arm",
)  # fmt: skip


def _row(alias: str) -> str:
    return "ROW(" + ", ".join(f"{alias}.{column}" for column in SHOWN_COLUMNS) + ")"


UPGRADE = f"""
DROP TRIGGER jobs_notify_changed ON jobs;
CREATE TRIGGER jobs_notify_changed AFTER UPDATE ON jobs
    FOR EACH ROW WHEN (OLD.status <> 'queued' AND {_row("OLD")} IS DISTINCT FROM {_row("NEW")})
    EXECUTE FUNCTION notify_job_changed();
CREATE TRIGGER jobs_notify_deleted AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.status <> 'queued') EXECUTE FUNCTION notify_job_changed();
"""
DOWNGRADE = """
DROP TRIGGER jobs_notify_deleted ON jobs;
DROP TRIGGER jobs_notify_changed ON jobs;
CREATE TRIGGER jobs_notify_changed AFTER UPDATE OR DELETE ON jobs
    FOR EACH ROW WHEN (OLD.status <> 'queued') EXECUTE FUNCTION notify_job_changed();
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(UPGRADE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(DOWNGRADE)
