"""a job's progress write notifies nothing: `job_changed` carries changes of its state (status,
cancel, priority, attempts, worker, error, ...), never of its progress; PostgreSQL only

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 12:55:00.000000

Every running job flushes its progress (`step`, `total_steps`, `progress`, `latest_metrics`,
and `updated_at` with them) about twice a second. Under 0020 each flush was a notifying
commit, and every notifying commit in the database takes PostgreSQL's one notification lock:
with a hundred running jobs that lock, not the work, set the pace of every commit. The
process-wide job feed (`api/live/feed.py`) wants a job's state changes, a few in its whole
life; what a job shows of its progress is read where it is shown (the streams' poller reads
it for the jobs it watches, and a kept GET answer of a running job expires after one flush
interval). So the trigger now compares the shown columns less the progress ones.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# What GET /v1/jobs/{id} shows, less what a progress flush writes (`progress`, `step`,
# `total_steps`, `latest_metrics`, `updated_at`). A test updates each column here and
# expects a notification, and each progress column and expects none.
STATE_COLUMNS = (
    "id", "method", "status", "label", "tags::text", "spec::text", "error", "warnings::text",
    "attempts", "cancel_requested", "worker", "created_at", "started_at", "finished_at",
    "owner_id", "team_id", "priority", "device", "study_id", "study_arm",
)  # fmt: skip
SHOWN_COLUMNS_0020 = (
    "id", "method", "status", "label", "tags::text", "spec::text", "progress", "step",
    "total_steps", "latest_metrics::text", "error", "warnings::text", "attempts",
    "cancel_requested", "worker", "created_at", "started_at", "finished_at", "updated_at",
    "owner_id", "team_id", "priority", "device", "study_id", "study_arm",
)  # fmt: skip


def _row(alias: str, columns: tuple[str, ...]) -> str:
    return "ROW(" + ", ".join(f"{alias}.{column}" for column in columns) + ")"


def _trigger(columns: tuple[str, ...]) -> str:
    return f"""
DROP TRIGGER jobs_notify_changed ON jobs;
CREATE TRIGGER jobs_notify_changed AFTER UPDATE ON jobs
    FOR EACH ROW WHEN (
        OLD.status <> 'queued' AND {_row("OLD", columns)} IS DISTINCT FROM {_row("NEW", columns)}
    )
    EXECUTE FUNCTION notify_job_changed();
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_trigger(STATE_COLUMNS))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_trigger(SHOWN_COLUMNS_0020))
