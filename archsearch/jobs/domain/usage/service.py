"""Usage reports: the device-seconds of the runs that overlap a window, grouped by user,
team or method and by device. A run that straddles an edge of the window counts only its
part inside; one still running counts up to its last lease renewal; one whose worker was
killed ends at its last renewal. Each run is charged its time times the share of the device
it held (`device_share`: 1/K on a worker with K slots). `runs` counts every claim, `attempts`
those that counted against `max_attempts` (a run handed back gave its attempt back)."""

from __future__ import annotations

import csv
import io
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from archsearch.core.errors import UserError
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.usage import repository
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.schemas.usage import UsageGroup, UsagePublic, UsageRow

DEFAULT_WINDOW = timedelta(days=7)


class InvalidWindow(UserError):
    field = "to"


def window(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """[start, end): by default the last seven days up to now."""
    end = as_utc(end) if end is not None else utcnow()
    start = as_utc(start) if start is not None else end - DEFAULT_WINDOW
    if start >= end:
        raise InvalidWindow(f"'to' ({end.isoformat()}) must be after 'from' ({start.isoformat()})")
    return start, end


def _overlap(attempt: JobAttempt, start: datetime, end: datetime) -> float:
    began = max(as_utc(attempt.started_at), start)
    ended = min(as_utc(attempt.last_seen_at), end)
    return max(0.0, (ended - began).total_seconds())


def report(
    session: Session,
    principal: Principal,
    start: datetime | None,
    end: datetime | None,
    group_by: UsageGroup,
) -> UsagePublic:
    """A user sees their team's usage; an admin every team's."""
    start, end = window(start, end)
    team: uuid.UUID | None = principal.team_filter
    rows: dict[tuple[str, str], _Sums] = defaultdict(_Sums)
    for run, team_name, user_name in repository.attempts_between(session, start, end, team):
        group = {"user": user_name, "team": team_name, "method": run.method}[group_by]
        rows[(group or "none", run.device)].add(run, _overlap(run, start, end))
    data = [sums.row(group, device) for (group, device), sums in sorted(rows.items())]
    return UsagePublic(start=start, end=end, group_by=group_by, data=data)


@dataclass
class _Sums:
    """One row of a report as its runs are added."""

    charged: float = 0.0
    held: float = 0.0
    runs: int = 0
    attempts: int = 0
    jobs: set[uuid.UUID] = field(default_factory=set)

    def add(self, run: JobAttempt, seconds_in_window: float) -> None:
        self.held += seconds_in_window
        self.charged += seconds_in_window * run.device_share
        self.runs += 1
        self.attempts += 0 if run.given_back else 1
        self.jobs.add(run.job_id)

    def row(self, group: str, device: str) -> UsageRow:
        return UsageRow(
            group=group,
            device=device,
            device_seconds=round(self.charged, 3),
            device_hours=round(self.charged / 3600, 6),
            held_seconds=round(self.held, 3),
            attempts=self.attempts,
            runs=self.runs,
            jobs=len(self.jobs),
        )


def as_csv(usage: UsagePublic) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    columns = ["device_seconds", "device_hours", "held_seconds", "attempts", "runs", "jobs"]
    writer.writerow([usage.group_by, "device", *columns])
    for row in usage.data:
        writer.writerow([row.group, row.device, *(getattr(row, name) for name in columns)])
    return out.getvalue()
