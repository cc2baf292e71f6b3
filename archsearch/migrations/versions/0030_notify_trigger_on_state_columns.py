"""the job-changed trigger fires only for updates that set a state column; PostgreSQL only

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29 00:30:00.000000

Under 0021 a progress flush notified nothing, but PostgreSQL still queued the trigger for
every updated row and evaluated its WHEN clause: twenty `OLD.x IS DISTINCT FROM NEW.x`
comparisons, among them `spec::text`, `tags::text` and `warnings::text` copied out of the
row twice. A flush is the fleet's most frequent write (every running job, every second)
and a lease renewal the next; measured on one job row, the WHEN clause was a quarter of a
flush's server CPU (0.33-0.36 ms against 0.24-0.26 ms). `AFTER UPDATE OF <columns>` makes
PostgreSQL skip the trigger when the statement's SET list names none of them, before any
WHEN is evaluated; the WHEN still drops an update that sets a state column to the value
it had. Nothing on `jobs` changes a column behind a statement's back (no BEFORE trigger),
so a state change always names its column.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0021's state columns: what GET /v1/jobs/{id} shows, less what a progress flush writes.
# A test checks that the trigger lists and compares every one of them.
STATE_COLUMNS = (
    "id", "method", "status", "label", "tags", "spec", "error", "warnings", "attempts",
    "cancel_requested", "worker", "created_at", "started_at", "finished_at", "owner_id",
    "team_id", "priority", "device", "study_id", "study_arm",
)  # fmt: skip
# JSON has no equality operator: those columns are compared as text.
AS_TEXT = {"tags", "spec", "warnings"}


def _compared(alias: str) -> str:
    return (
        "ROW("
        + ", ".join(f"{alias}.{c}::text" if c in AS_TEXT else f"{alias}.{c}" for c in STATE_COLUMNS)
        + ")"
    )


def _trigger(update_of: str) -> str:
    return f"""
DROP TRIGGER jobs_notify_changed ON jobs;
CREATE TRIGGER jobs_notify_changed AFTER UPDATE {update_of}ON jobs
    FOR EACH ROW WHEN (
        OLD.status <> 'queued' AND {_compared("OLD")} IS DISTINCT FROM {_compared("NEW")}
    )
    EXECUTE FUNCTION notify_job_changed();
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_trigger(f"OF {', '.join(STATE_COLUMNS)} "))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_trigger(""))
